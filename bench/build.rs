//! Records the compiler that builds the harness, for the report header, and builds the
//! `c_spawn` workload's C program.
use std::process::Command;

fn main() {
    let rustc = std::env::var("RUSTC").unwrap_or_else(|_| "rustc".into());
    let version = Command::new(rustc)
        .arg("-V")
        .output()
        .ok()
        .and_then(|o| String::from_utf8(o.stdout).ok())
        .map(|s| s.trim().to_string())
        .unwrap_or_else(|| "unknown".into());
    println!("cargo:rustc-env=BENCH_RUSTC_VERSION={version}");
    println!("cargo:rerun-if-changed=build.rs");
    println!("cargo:rerun-if-env-changed=RUSTC");
    c_spawn();
}

/// The `c_spawn` workload's C program (c/c_spawn.c), linked against the root crate's
/// `target/release/libpool.a` (built by `make lib`). Its path goes to the harness as
/// `C_SPAWN_BIN`, empty when the library is missing or the build fails (the row is skipped).
fn c_spawn() {
    let dir = std::path::PathBuf::from(std::env::var("CARGO_MANIFEST_DIR").expect("CARGO_MANIFEST_DIR"));
    let root = dir.join("..");
    let lib = root.join("target/release/libpool.a");
    let src = dir.join("c/c_spawn.c");
    let out = std::path::PathBuf::from(std::env::var("OUT_DIR").expect("OUT_DIR")).join("c_spawn");
    println!("cargo:rerun-if-changed=c/c_spawn.c");
    println!("cargo:rerun-if-changed=../include/pool.h");
    println!("cargo:rerun-if-changed=../target/release/libpool.a");
    println!("cargo:rerun-if-env-changed=CC");
    let mut bin = String::new();
    if lib.exists() {
        let cc = std::env::var("CC").unwrap_or_else(|_| "cc".into());
        let status = Command::new(&cc)
            .args(["-std=c11", "-O2", "-Wall", "-Wextra", "-Werror", "-pedantic", "-I"])
            .arg(root.join("include"))
            .arg(&src)
            .arg(&lib)
            .args(["-lpthread", "-ldl", "-lm", "-o"])
            .arg(&out)
            .status();
        match status {
            Ok(s) if s.success() => bin = out.display().to_string(),
            other => println!("cargo:warning=c_spawn: {cc} failed ({other:?}): the c_spawn row is skipped"),
        }
    } else {
        println!("cargo:warning=c_spawn: {} missing (run `make lib`): the c_spawn row is skipped", lib.display());
    }
    println!("cargo:rustc-env=C_SPAWN_BIN={bin}");
}
