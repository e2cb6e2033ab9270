#!/bin/sh
# A program nobody here wrote, on this library: zstd with its thread pool replaced by a queue
# (c_tests/external/zstd_pool.c, the shim), checked by zstd's own pool test and against the same
# sources built with zstd's own pool.
#   sh scripts/external-zstd.sh [LIBPOOL_A]     (default target/release/libpool.a; `make lib`)
#
# zstd's sources come from Debian's archive (the orig tarball of bookworm's libzstd, checked
# against its SHA-256 below) into target/external/ once; nothing of zstd is committed. Then:
#   1. zstd's tests/poolTests.c on the shim (FIFO start, a bound that blocks POOL_add, resizing
#      4 -> 2 threads with the concurrency reaching exactly 4 then 2, POOL_free finishing the
#      queue), 5 runs, then once under valgrind: no error and every block freed;
#   2. zstd's streaming tests (tests/zstreamtest.c, its unit tests and its fuzzer for a fixed
#      seed and time, the advanced API's random worker counts included: POOL_resize above the
#      creation count) on the shim;
#   3. the zstd program built twice from one set of objects, with zstd's pool.c and with the
#      shim: multi-threaded compression (zstdmt: POOL_tryAdd with queueSize 0, one job per
#      worker, jobs that depend on each other's progress) at several levels, worker counts, job
#      sizes, long-distance matching and --rsyncable must give the same bytes with either pool
#      (zstd's output does not depend on scheduling), and decompress to the input; dictionary
#      training (fastcover, POOL_add with queueSize 1, -T4) must give the same dictionary.
# Every step runs under a time limit, so a hang fails instead of stalling `make test`.
set -eu
NAME=external-zstd
. "$(dirname "$0")/external-common.sh" # ROOT LIB CC DIR fail fetch
VERSION=1.5.4
URL=http://deb.debian.org/debian/pool/main/libz/libzstd/libzstd_$VERSION+dfsg2.orig.tar.xz
SHA256=8cf4bbb65e77ec348d052c8d6230eba66d435bddf64c8b5be2fcb16880c19953
Z=$DIR/zstd-$VERSION
OUT=$DIR/zstd-$VERSION-build

fetch "$URL" "$SHA256" "$(basename "$Z")"
mkdir -p "$OUT/obj"

CFLAGS="-O2 -pthread -DZSTD_MULTITHREAD -DZSTD_LEGACY_SUPPORT=0 -I$Z/lib -I$Z/lib/common -I$Z/programs"
LIBS="$LIB -lpthread -ldl -lm"
SHIM=$ROOT/c_tests/external/zstd_pool.c

echo "== zstd's poolTests on the shim"
$CC $CFLAGS "$Z/tests/poolTests.c" "$SHIM" "$Z/programs/util.c" "$Z/programs/timefn.c" \
    "$Z/lib/common/threading.c" "$Z/lib/common/zstd_common.c" "$Z/lib/common/error_private.c" \
    $LIBS -o "$OUT/poolTests"
for i in 1 2 3 4 5; do
    timeout 30 "$OUT/poolTests" > "$OUT/poolTests.log" 2>&1 || { cat "$OUT/poolTests.log"; fail "poolTests, run $i"; }
done
tail -n 1 "$OUT/poolTests.log"
timeout 300 valgrind -q --fair-sched=yes --error-exitcode=1 --leak-check=full --show-leak-kinds=all \
    --errors-for-leak-kinds=all "$OUT/poolTests" > "$OUT/poolTests-valgrind.log" 2>&1 \
    || { cat "$OUT/poolTests-valgrind.log"; fail "poolTests under valgrind"; }
echo "poolTests under valgrind: no error, every block freed"

echo "== the zstd program with its own pool and with the shim"
# One object per source, built once per extraction (-P2: these machines have 2 cores).
for f in "$Z"/lib/common/*.c "$Z"/lib/compress/*.c "$Z"/lib/decompress/*.c "$Z"/lib/decompress/*.S \
         "$Z"/lib/dictBuilder/*.c "$Z"/programs/*.c "$Z"/tests/datagencli.c; do
    o=$OUT/obj/$(basename "$f").o
    [ -f "$o" ] || echo "$f $o"
done | xargs -r -n 2 -P 2 sh -c '$0 $1 -c "$2" -o "$3"' "$CC" "$CFLAGS" || fail "building zstd"
objs=$(ls "$OUT"/obj/*.o | grep -v -e '/pool\.c\.o$' -e '/datagencli\.c\.o$')
$CC -pthread $objs "$OUT/obj/pool.c.o" -o "$OUT/zstd-own"
$CC $CFLAGS -Wall -Wextra -Werror -c "$SHIM" -o "$OUT/shim.o"
$CC -pthread $objs "$OUT/shim.o" $LIBS -o "$OUT/zstd-pool"
$CC "$OUT/obj/datagencli.c.o" "$OUT/obj/datagen.c.o" -o "$OUT/datagen"

"$OUT/datagen" -g24MB -s7 -P40 > "$OUT/in.bin" 2>/dev/null
for args in "-T4 -3 -B512K" "-T2 -1 -B512K" "-T4 -12 -B1M" "-T4 --long=24 -6" "-T3 --rsyncable -5" "-T8 -3 -B512K"; do
    # shellcheck disable=SC2086
    timeout 120 "$OUT/zstd-own" -q -f $args "$OUT/in.bin" -o "$OUT/own.zst" || fail "zstd (own pool) $args"
    # shellcheck disable=SC2086
    timeout 120 "$OUT/zstd-pool" -q -f $args "$OUT/in.bin" -o "$OUT/pool.zst" || fail "zstd (shim) $args: failed or hung"
    cmp -s "$OUT/own.zst" "$OUT/pool.zst" || fail "zstd $args: the shim's output differs from zstd's own pool's"
    timeout 120 "$OUT/zstd-own" -q -d -f "$OUT/pool.zst" -o "$OUT/back.bin" || fail "decompressing the shim's output ($args)"
    cmp -s "$OUT/back.bin" "$OUT/in.bin" || fail "zstd $args: round trip differs"
    echo "zstd $args: same $(stat -c %s "$OUT/pool.zst") bytes with either pool, round trip ok"
done
echo "== zstd's streaming tests (tests/zstreamtest.c: its unit tests, then its fuzzer, multi-threaded included) on the shim"
# Its own objects in a folder of their own (the program's link takes every object of obj/).
mkdir -p "$OUT/obj-zstreamtest"
for f in "$Z/tests/zstreamtest.c" "$Z/tests/seqgen.c" "$Z/tests/external_matchfinder.c"; do
    o=$OUT/obj-zstreamtest/$(basename "$f").o
    [ -f "$o" ] || $CC $CFLAGS -I"$Z/lib/compress" -I"$Z/lib/dictBuilder" -I"$Z/tests" -c "$f" -o "$o" || fail "building $f"
done
libobjs=$(ls "$OUT"/obj/*.o | grep -v -e '/pool\.c\.o$' -e '/datagencli\.c\.o$' -e '/zstdcli' -e '/fileio' \
    -e '/benchzstd\.c\.o$' -e '/benchfn\.c\.o$' -e '/dibio\.c\.o$')
$CC -pthread "$OUT"/obj-zstreamtest/*.o $libobjs "$OUT/shim.o" $LIBS -o "$OUT/zstreamtest"
timeout 120 "$OUT/zstreamtest" -T10s -s1234 > "$OUT/zstreamtest.log" 2>&1 || { tail -c 2000 "$OUT/zstreamtest.log"; fail "zstreamtest"; }
timeout 120 "$OUT/zstreamtest" --newapi -t1 -T15s -s1234 > "$OUT/zstreamtest-newapi.log" 2>&1 || { tail -c 2000 "$OUT/zstreamtest-newapi.log"; fail "zstreamtest --newapi"; }
echo "zstreamtest (10 s) and zstreamtest --newapi (15 s, random worker counts: POOL_resize both ways): passed"
head -c 2000000 "$OUT/in.bin" > "$OUT/samples.bin"
timeout 120 "$OUT/zstd-own" -q -f --train-fastcover -T4 -B4096 "$OUT/samples.bin" -o "$OUT/own.dict" || fail "training (own pool)"
timeout 120 "$OUT/zstd-pool" -q -f --train-fastcover -T4 -B4096 "$OUT/samples.bin" -o "$OUT/pool.dict" || fail "training (shim): failed or hung"
cmp -s "$OUT/own.dict" "$OUT/pool.dict" || fail "fastcover -T4: the shim's dictionary differs"
echo "zstd --train-fastcover -T4: same dictionary with either pool"
echo "external-zstd: all green"
