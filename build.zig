//! Zig build for pool: a Zig project adds pool as a dependency (by path or tarball) and gets the
//! module "pool": pool.h translated to Zig (translate-c; Zig 0.17 has no @cImport) with
//! libpool.a, libc and libunwind linked.
//!
//!     // build.zig.zon: .dependencies = .{ .pool = .{ .path = "../pool" } },
//!     const pool = b.dependency("pool", .{ .target = target, .optimize = optimize });
//!     exe.root_module.addImport("pool", pool.module("pool"));
//!
//!     // main.zig
//!     const c = @import("pool");
//!
//! libpool.a is built by cargo (`cargo rustc --release --lib --features capi --crate-type
//! staticlib`), so cargo must be on PATH. Its target directory is `-Dcargo-target-dir=DIR`,
//! by default `pool-cargo` in the root project's Zig cache (kept between builds, so cargo
//! rebuilds only what changed). Steps of this package itself: `zig build` builds
//! the example (examples/zig/main.zig, a parallel quicksort) into zig-out/bin/qsort;
//! `zig build run` runs it.
const std = @import("std");

pub fn build(b: *std.Build) void {
    const target = b.standardTargetOptions(.{});
    const optimize = b.standardOptimizeOption(.{});
    const cargo_target_dir = b.option([]const u8, "cargo-target-dir", "cargo's --target-dir for libpool.a (default: in Zig's cache)");

    // libpool.a from cargo, copied out of cargo's target directory into Zig's cache. Cargo
    // decides what to rebuild, so the step always runs (a no-op when nothing changed).
    const target_dir = if (cargo_target_dir) |dir| b.graph.cwdRelativePath(dir) else b.graph.path(.local_cache, "pool-cargo");
    const cargo = b.addSystemCommand(&.{
        "sh", "-c",
        \\cargo rustc --quiet --release --lib --features capi --crate-type staticlib \
        \\  --manifest-path "$1" --target-dir "$2" && cp "$2/release/libpool.a" "$3"
        , "cargo-libpool",
    });
    cargo.addFileArg(b.path("Cargo.toml"));
    cargo.addDirectoryArg(target_dir);
    const libpool = cargo.addOutputFileArg("libpool.a");
    cargo.has_side_effects = true;

    const header = b.addTranslateC(.{
        .root_source_file = b.path("include/pool.h"),
        .target = target,
        .optimize = optimize,
        .link_libc = true,
    });
    const pool = header.addModule("pool");
    pool.addObjectFile(libpool);
    // A Rust staticlib needs the C library and libunwind (its panic machinery) at link time.
    pool.linkSystemLibrary("unwind", .{});

    const exe = b.addExecutable(.{
        .name = "qsort",
        .root_module = b.createModule(.{
            .root_source_file = b.path("examples/zig/main.zig"),
            .target = target,
            .optimize = optimize,
            .imports = &.{.{ .name = "pool", .module = pool }},
        }),
    });
    b.installArtifact(exe);
    const run = b.addRunArtifact(exe);
    b.step("run", "Run the example (a parallel quicksort of 10M integers)").dependOn(&run.step);
}
