#!/bin/sh
# The Zig host, built the way a Zig project uses pool: `zig build` of this package (build.zig:
# module "pool" = translated pool.h + libpool.a) builds and runs examples/zig/main.zig; then a
# consumer project that adds pool as a path dependency (build.zig.zon) builds README's Zig
# program ("### Zig" under "## Hosts") and runs it (it must print 9801).
#   sh examples/zig/run.sh [OUTDIR]
# Needs Zig 0.17 as `zig` on PATH or as the PyPI package; installs the latter when neither is
# there (scripts/tools.sh zig) and fails naming what is missing when that fails.
set -eu
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
OUT=${1:-$ROOT/build/zig}
case $OUT in /*) ;; *) OUT=$ROOT/$OUT ;; esac

# main.zig is written for Zig 0.17 (translate-c, no @cImport): find one, or install it.
is_017() { case $($1 version 2>/dev/null) in 0.17.*) return 0 ;; *) return 1 ;; esac; }
find_zig() {
    if [ -n "${ZIG:-}" ] && is_017 "$ZIG"; then return 0; fi
    for z in zig "python3 -m ziglang"; do
        if is_017 "$z"; then ZIG=$z; return 0; fi
    done
    return 1
}
if ! find_zig; then
    sh "$ROOT/scripts/tools.sh" zig
    find_zig || { echo "FAIL: zig example: no Zig 0.17 after 'sh scripts/tools.sh zig'"; exit 1; }
fi
echo "zig: $($ZIG version) ($ZIG)"
mkdir -p "$OUT"
# One Zig cache for both builds, so one cargo target dir (pool-cargo in it): cargo and Zig
# rebuild only what changed.
cd "$ROOT"
$ZIG build run -Doptimize=ReleaseFast --cache-dir "$OUT/.zig-cache" --prefix "$OUT/out"

# A Zig project with pool as a dependency, by path (a tarball URL works the same way).
C="$OUT/consumer"
rm -rf "$C" && mkdir -p "$C"
awk '$0 == "### Zig" { f = 1; next } f && !b && $0 == "```zig" { b = 1; next } b && $0 == "```" { exit } b { print }' \
    "$ROOT/README.md" > "$C/main.zig"
[ -s "$C/main.zig" ] || { echo "FAIL: no \`\`\`zig block under '### Zig' in README.md"; exit 1; }
awk '$0 == "### Zig" { f = 1; next } f && !b && $0 == "```zig-build" { b = 1; next } b && $0 == "```" { exit } b { print }' \
    "$ROOT/README.md" > "$C/build.zig"
[ -s "$C/build.zig" ] || { echo "FAIL: no \`\`\`zig-build block under '### Zig' in README.md"; exit 1; }
cat > "$C/build.zig.zon" <<ZON
.{
    .name = .pool_consumer,
    .version = "0.0.0",
    .fingerprint = 0x5f2329968082b8cb,
    .minimum_zig_version = "0.17.0",
    .dependencies = .{ .pool = .{ .path = "$(realpath --relative-to="$C" "$ROOT")" } },
    .paths = .{ "build.zig", "build.zig.zon", "main.zig" },
}
ZON
cd "$C"
$ZIG build --cache-dir "$OUT/.zig-cache" --prefix "$C/out" \
    || { echo "FAIL: README's Zig program does not build as a project depending on pool"; exit 1; }
got=$("$C/out/bin/hello" 2>&1)
[ "$got" = 9801 ] || { echo "FAIL: README's Zig program printed '$got', want 9801"; exit 1; }
echo "zig: README's Zig program built by zig build with pool as a path dependency, and ran"
