#!/bin/sh
# The hot paths' instruction counts under callgrind (exact run to run, unlike wall time on
# these VMs): fork-join per join, an outside submit per task, an async yield per yield.
# A restructuring must leave them within a few percent (BENCHMARKS.md has the history).
#   sh scripts/probes.sh [target-dir]
set -eu
dir=${1:-target}
cargo build --quiet --release --target-dir "$dir" --example fib_probe --example spawn_remote --example yield_probe
bin=$dir/release/examples
out=$(mktemp -d)
ir() { # total instructions of one callgrind run of a command. --fair-sched=yes: valgrind runs
    # one thread at a time, and its default lock lets the two workers interleave differently
    # from run to run (steals, parks), which made the counts bimodal; its fair scheduler
    # makes them repeat.
    valgrind --tool=callgrind --fair-sched=yes --callgrind-out-file="$out/cg" "$@" >/dev/null 2>&1
    sed -n 's/^summary: //p' "$out/cg"
}
f15=$(ir "$bin/fib_probe" 15 1)
f20=$(ir "$bin/fib_probe" 20 1)
s1=$(ir "$bin/spawn_remote" 1 2)
sn=$(ir "$bin/spawn_remote" 100000 2)
y0=$(ir "$bin/yield_probe" 10000 0 2)
y100=$(ir "$bin/yield_probe" 10000 100 2)
rm -rf "$out"
awk -v f15="$f15" -v f20="$f20" -v s1="$s1" -v sn="$sn" -v y0="$y0" -v y100="$y100" 'BEGIN {
    printf "fib_probe     %6.1f instructions per join   ((Ir(20) - Ir(15)) / 9959, whole program, 1 worker)\n", (f20 - f15) / 9959
    printf "spawn_remote  %6.1f instructions per task   ((Ir(100000) - Ir(1)) / 99999, 2 workers)\n", (sn - s1) / 99999
    printf "yield_probe   %6.1f instructions per yield  ((Ir(100) - Ir(0)) / 1000000, 2 workers)\n", (y100 - y0) / 1000000
}'
