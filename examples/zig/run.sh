#!/bin/sh
# Builds and runs the Zig host (examples/zig/main.zig) against libpool.a and include/pool.h.
#   sh examples/zig/run.sh [LIBPOOL] [OUTDIR]
# Needs Zig 0.17 as `zig` on PATH or as the PyPI package; installs the latter when neither is
# there (scripts/tools.sh zig) and fails naming what is missing when that fails.
set -eu
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
LIB=${1:-$ROOT/target/release/libpool.a}
OUT=${2:-$ROOT/build/zig}
case $LIB in /*) ;; *) LIB=$ROOT/$LIB ;; esac
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
# @cImport is gone in Zig 0.17: translate the header to a Zig file first.
$ZIG translate-c -lc -I"$ROOT/include" "$ROOT/include/pool.h" > "$OUT/pool_c.zig"
cp "$ROOT/examples/zig/main.zig" "$OUT/main.zig"
cd "$OUT"
# A Rust staticlib needs libc and libunwind (panic machinery) at link time.
$ZIG build-exe main.zig "$LIB" -lc -lunwind -OReleaseFast --cache-dir "$OUT/.zig-cache" -femit-bin="$OUT/qsort"
"$OUT/qsort"

# The README's Zig program ("### Zig" under "## Hosts") must build and print 9801.
mkdir -p "$OUT/readme"
awk '$0 == "### Zig" { f = 1; next } f && !b && $0 == "```zig" { b = 1; next } b && $0 == "```" { exit } b { print }' \
    "$ROOT/README.md" > "$OUT/readme/main.zig"
if [ -s "$OUT/readme/main.zig" ]; then
    cp "$OUT/pool_c.zig" "$OUT/readme/"
    cd "$OUT/readme"
    $ZIG build-exe main.zig "$LIB" -lc -lunwind --cache-dir "$OUT/.zig-cache" -femit-bin="$OUT/readme/hello"
    got=$("$OUT/readme/hello" 2>&1)
    [ "$got" = 9801 ] || { echo "FAIL: README's Zig program printed '$got', want 9801"; exit 1; }
    echo "zig: README's Zig program built and ran"
fi
