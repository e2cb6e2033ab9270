#!/bin/sh
# Measures the footprint figures recorded in FOOTPRINT.md:
#  1. .text of the pool's core on thumbv7em-none-eabihf at opt-level "s" (LTO, panic=abort):
#     examples/nostd's bare-metal `footprint` binary, minus the same binary without the pool;
#  2. the size of the pool's shared state and of one worker's state on that target, from
#     rustc's -Zprint-type-sizes (needs a nightly toolchain with the thumbv7em target; skipped
#     with a note otherwise).
set -eu
ROOT=$(cd "$(dirname "$0")/.." && pwd)
T=thumbv7em-none-eabihf
DIR="$ROOT/target/nostd-example"
BIN="$DIR/$T/release/footprint"
SIZE=$(command -v llvm-size || command -v size)
cd "$ROOT/examples/nostd"

text() { "$SIZE" -A "$1" | awk '$1 == ".text" { print $2 }'; }

cargo build -q --release --bin footprint --target $T --target-dir "$DIR" --features footprint,footprint-baseline
base=$(text "$BIN")
cargo build -q --release --bin footprint --target $T --target-dir "$DIR" --features footprint
full=$(text "$BIN")
echo "$T opt-level=s lto panic=abort:"
echo "  .text with the pool    $full B"
echo "  .text baseline         $base B   (entry, bump allocator, host stubs)"
echo "  .text of the core      $((full - base)) B = $(awk "BEGIN { printf \"%.2f\", ($full - $base) / 1024 }") KiB   (target: at most 10 KiB)"
echo "  largest pool functions:"
llvm-nm --size-sort -S --radix=d --demangle "$BIN" 2>/dev/null \
    | awk '/ pool::/ { name = $4; for (i = 5; i <= NF; i++) name = name " " $i; printf "    %6d  %s\n", $2, name }' \
    | sed -e 's/::h[0-9a-f]\{16\}$//' -e 's/\$LT\$/</g' -e 's/\$GT\$/>/g' -e 's/\$u20\$/ /g' -e 's/\.\./::/g' -e 's/_<impl/<impl/' | tail -n 8 || true

if rustup target list --installed --toolchain nightly 2>/dev/null | grep -qx $T; then
    # rustc prints the sizes only when it compiles the binary: drop the cached one first.
    cargo +nightly clean -q --release -p pool-nostd --target $T --target-dir "$DIR/nightly" 2>/dev/null || true
    cargo +nightly rustc -q --release --bin footprint --target $T --target-dir "$DIR/nightly" \
        --features footprint -- -Zprint-type-sizes 2>/dev/null > "$DIR/type-sizes.txt" || true
    echo "$T type sizes (rustc -Zprint-type-sizes, full list in $DIR/type-sizes.txt):"
    grep -E '^print-type-size type: `(pool::scheduler::inner::Inner<|pool::scheduler::worker::Worker<|pool::queue::ring::Ring`|pool::queue::deque::JoinDeque`|pool::queue::injector::Injector`|pool::timer::wheel::Timers`|pool::ThreadPool<|pool_nostd::SpinParker`)' \
        "$DIR/type-sizes.txt" | sed -e 's/^print-type-size type: /  /' | sort -u
else
    echo "type sizes: SKIP (needs: rustup target add $T --toolchain nightly)"
fi
