#!/bin/sh
# Builds a libpool.a whose caller-allocated structs (pool_config, pool_blocking_config,
# pool_stats, pool_blocking_metrics, pool_platform, pool_queue_stats) have grown by a field, as the next minor
# version's will: the new field `grown` takes the first reserved word, and the library stores
# POOL_ABI_GROWN_MARK in it wherever it builds such a struct (init functions, statistics).
# Then runs c_tests/abi.c, compiled against the committed pool.h (the old layout), against it.
#   sh scripts/abi-grown.sh [OUTDIR]
set -eu
ROOT=$(cd "$(dirname "$0")/.." && pwd)
OUT=${1:-$ROOT/build/abi-grown}
CC=${CC:-cc}
CARGO=${CARGO:-cargo}
rm -rf "$OUT/src" && mkdir -p "$OUT"
cp -R "$ROOT/src" "$ROOT/Cargo.toml" "$ROOT/Cargo.lock" "$OUT/"
# The copy needs no header: no cbindgen (and no build-dependency to compile).
sed -i 's/^capi = \["std", "dep:cbindgen"\]/capi = ["std"]/' "$OUT/Cargo.toml"
printf '//! The grown copy'"'"'s build script: no header.\nfn main() { println!("cargo:rustc-check-cfg=cfg(loom)"); }\n' > "$OUT/build.rs"
# A struct's reserved words: POOL_RESERVED_WORDS, or its own count once fields of earlier minor
# versions took some (POOL_BLOCKING_METRICS_RESERVED_WORDS).
W='POOL_[A-Z_]*RESERVED_WORDS'
n=$(grep -l "pub reserved: \[usize; $W\]," "$OUT"/src/capi/*.rs | wc -l)
# The field: declared before the reserved words, which shrink by one.
sed -i -e "s|^\( *\)pub reserved: \[usize; \($W\)\],|\1/// The field a later minor version adds.\n\1pub grown: usize,\n\1/// The reserved words left.\n\1pub reserved: [usize; \2 - 1],|" \
       -e "s|reserved: \[0; \($W\)\]|grown: 0x6772_6f77, reserved: [0; \1 - 1]|" \
    "$OUT"/src/capi/*.rs
grown=$(grep -c 'pub grown: usize' "$OUT"/src/capi/*.rs | awk -F: '{ s += $2 } END { print s }')
[ "$grown" = 6 ] || { echo "FAIL: abi-grown: $grown structs grown (files: $n), want 6"; exit 1; }
# Its own target dir: the grown libpool.a must not replace target/release/libpool.a.
(cd "$OUT" && $CARGO rustc --quiet --release --lib --features capi --crate-type staticlib \
    --target-dir "$ROOT/target/abi-grown") || { echo "FAIL: abi-grown: the grown library does not build"; exit 1; }
$CC -std=c11 -O1 -Wall -Wextra -Werror -pedantic -I"$ROOT/include" "$ROOT/c_tests/abi.c" \
    "$ROOT/target/abi-grown/release/libpool.a" -lpthread -ldl -lm -o "$OUT/abi"
POOL_ABI_GROWN=1 "$OUT/abi"
echo "abi-grown: a program built for the old layout ran against a library whose structs grew by a field"
