#!/bin/sh
# A program nobody here wrote, on this library: lz4 1.10 with its thread pool replaced by a
# queue (c_tests/external/lz4_threadpool.c, the shim), checked against the same sources built
# with lz4's own pool and by lz4's own test scripts.
#   sh scripts/external-lz4.sh [LIBPOOL_A]     (default target/release/libpool.a; `make lib`)
#
# lz4's sources come from Debian's archive (the orig tarball of lz4 1.10.0, checked against its
# SHA-256 below) into target/external/ once; nothing of lz4 is committed. Then:
#   1. the lz4 program built twice from one set of objects, with lz4's threadpool.c and with
#      the shim: multi-threaded compression (-T2..-T8: a reader job that queues the next read
#      on its own bounded pool and waits there while it is full, compression jobs, and a
#      one-thread writer pool that must run its jobs in the order queued) at several levels,
#      block sizes, linked blocks and the legacy format must give the same bytes with either
#      pool, and decompress (a one-thread reader pool and writer pool) to the input; one
#      compression and its decompression under valgrind: no error, every block freed;
#   2. lz4's own test scripts (tests/test-lz4-*.sh: basic, multiple files, legacy, frame
#      concatenation, skippable frames, sparse files, content size, dictionaries, the optimal
#      parser, test mode) with the shim's lz4 first in PATH, at LZ4_NBWORKERS=4 (on 2 cores
#      lz4 would pick one worker).
# Every step runs under a time limit, so a hang fails instead of stalling `make test`.
set -eu
NAME=external-lz4
. "$(dirname "$0")/external-common.sh" # ROOT LIB CC DIR fail fetch
VERSION=1.10.0
URL=http://deb.debian.org/debian/pool/main/l/lz4/lz4_$VERSION.orig.tar.gz
SHA256=537512904744b35e232912055ccf8ec66d768639ff3abe5788d90d792ec5f48b
L=$DIR/lz4-$VERSION
OUT=$DIR/lz4-$VERSION-build

fetch "$URL" "$SHA256" "$(basename "$L")"
mkdir -p "$OUT/obj" "$OUT/bin-pool" "$OUT/bin-own"

CFLAGS="-O2 -pthread -DLZ4IO_MULTITHREAD=1 -I$L/lib -I$L/programs"
LIBS="$LIB -lpthread -ldl -lm"
SHIM=$ROOT/c_tests/external/lz4_threadpool.c

echo "== the lz4 program with its own pool and with the shim"
# One object per source, built once per extraction (-P2: these machines have 2 cores).
for f in "$L"/lib/lz4.c "$L"/lib/lz4hc.c "$L"/lib/lz4frame.c "$L"/lib/lz4file.c "$L"/lib/xxhash.c \
         "$L"/programs/*.c "$L"/tests/datagen.c "$L"/tests/datagencli.c "$L"/tests/loremOut.c; do
    o=$OUT/obj/$(basename "$f").o
    [ -f "$o" ] || echo "$f $o"
done | xargs -r -n 2 -P 2 sh -c '$0 $1 -c "$2" -o "$3"' "$CC" "$CFLAGS" || fail "building lz4"
objs=$(ls "$OUT"/obj/*.o | grep -v -e '/threadpool\.c\.o$' -e '/datagen' -e '/loremOut')
$CC -pthread $objs "$OUT/obj/threadpool.c.o" -o "$OUT/bin-own/lz4"
$CC $CFLAGS -Wall -Wextra -Werror -c "$SHIM" -o "$OUT/shim.o"
$CC -pthread $objs "$OUT/shim.o" $LIBS -o "$OUT/bin-pool/lz4"
$CC "$OUT/obj/datagen.c.o" "$OUT/obj/datagencli.c.o" "$OUT/obj/loremOut.c.o" "$OUT/obj/lorem.c.o" -o "$OUT/bin-pool/datagen"
for tool in unlz4 lz4cat; do ln -sf lz4 "$OUT/bin-pool/$tool"; done
cp "$OUT/bin-pool/datagen" "$OUT/bin-own/datagen"

"$OUT/bin-pool/datagen" -g48MB -s5 -P50 > "$OUT/in.bin" 2>/dev/null
for args in "-T2 -1" "-T4 -1 -B4" "-T4 -1 -BD -B5" "-T3 -9 -B6" "-T8 -1 -B4" "-T2 -l" "-T4 -l -5" "-T4 --no-frame-crc -2"; do
    # shellcheck disable=SC2086
    timeout 120 "$OUT/bin-own/lz4" -q -f $args "$OUT/in.bin" "$OUT/own.lz4" || fail "lz4 (own pool) $args"
    # shellcheck disable=SC2086
    timeout 120 "$OUT/bin-pool/lz4" -q -f $args "$OUT/in.bin" "$OUT/pool.lz4" || fail "lz4 (shim) $args: failed or hung"
    cmp -s "$OUT/own.lz4" "$OUT/pool.lz4" || fail "lz4 $args: the shim's output differs from lz4's own pool's"
    timeout 120 "$OUT/bin-pool/lz4" -q -d -f "$OUT/pool.lz4" "$OUT/back.bin" || fail "decompressing with the shim ($args)"
    cmp -s "$OUT/back.bin" "$OUT/in.bin" || fail "lz4 $args: round trip differs"
    echo "lz4 $args: same $(stat -c %s "$OUT/pool.lz4") bytes with either pool, round trip ok"
done
# stdin to stdout, the pipe the test scripts use most.
timeout 120 "$OUT/bin-pool/lz4" -q -T4 -B4 < "$OUT/in.bin" | timeout 120 "$OUT/bin-pool/lz4" -q -d | cmp -s - "$OUT/in.bin" \
    || fail "lz4 -T4 through pipes: round trip differs"
echo "lz4 -T4 through pipes: round trip ok"
# Under valgrind: no error, and every block the shim and the library allocated freed.
head -c 3000000 "$OUT/in.bin" > "$OUT/small.bin"
for args in "-T4 -1 -B4" "-d"; do
    input=$OUT/small.bin; [ "$args" = "-d" ] && input=$OUT/small.lz4
    # shellcheck disable=SC2086
    timeout 300 valgrind -q --fair-sched=yes --error-exitcode=1 --leak-check=full --show-leak-kinds=all \
        --errors-for-leak-kinds=all "$OUT/bin-pool/lz4" -q -f $args "$input" "$OUT/small.out" > "$OUT/valgrind.log" 2>&1 \
        || { cat "$OUT/valgrind.log"; fail "lz4 $args under valgrind"; }
    [ "$args" = "-d" ] || mv "$OUT/small.out" "$OUT/small.lz4"
done
cmp -s "$OUT/small.out" "$OUT/small.bin" || fail "the round trip under valgrind differs"
echo "lz4 -T4 and lz4 -d under valgrind: no error, every block freed"

echo "== lz4's own test scripts on the shim (LZ4_NBWORKERS=4)"
mkdir -p "$OUT/scripts"
ln -sfn "$L/tests/goldenSamples" "$OUT/scripts/goldenSamples"
for t in basic multiple multiple-legacy frame-concatenation skippable sparse contentSize dict opt-parser testmode; do
    s=$L/tests/test-lz4-$t.sh
    [ -f "$s" ] || fail "no $s"
    ( cd "$OUT/scripts" && PATH="$OUT/bin-pool:$PATH" LZ4_NBWORKERS=4 timeout 300 sh "$s" > "$OUT/scripts/$t.log" 2>&1 ) \
        || { tail -n 30 "$OUT/scripts/$t.log"; fail "lz4's test-lz4-$t.sh"; }
    echo "test-lz4-$t.sh: passed"
done
echo "external-lz4: all green"
