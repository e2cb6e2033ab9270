#!/bin/sh
# A second program nobody here wrote, on this library: libuv with its thread pool (worker
# threads, queue, uv_cancel) replaced by a pool and a queue (c_tests/external/uv_threadpool.c),
# checked by libuv's own test suite.
#   sh scripts/external-libuv.sh [LIBPOOL_A]     (default target/release/libpool.a; `make lib`)
#
# libuv's sources come from Debian's archive (the orig tarball of bookworm's libuv1, checked
# against its SHA-256 below) into target/external/ once; nothing of libuv is committed. Its
# src/threadpool.c is rebuilt here from three parts: libuv's includes and `uv__cancelled`, the
# shim, and libuv's `uv__work_done`, `uv_queue_work` and `uv_cancel` (the rest of the file is
# what the shim replaces). Then libuv is built twice with CMake, with its own pool and with
# the shim, and its whole test suite (~400 tests, each in its own process) runs on the shim:
# thread pool work and cancel (a saturated pool's waiting requests cancelled: uv_cancel's
# semantics), file system, DNS and random requests, fork with the pool in use. A test that
# fails on the shim fails this check unless it also fails, in at least one of three runs, on
# libuv's own pool here (two TCP tests need a network outside, closed on these machines):
# those are listed, not counted. libuv's tests refuse to run as root: as root,
# they run as `nobody`, in a folder of their own.
set -eu
NAME=external-libuv
. "$(dirname "$0")/external-common.sh" # ROOT LIB CC DIR fail fetch
CMAKE=${CMAKE:-$(sh "$ROOT/scripts/tools.sh" cmake-path)}
VERSION=1.44.2
URL=http://deb.debian.org/debian/pool/main/libu/libuv1/libuv1_$VERSION.orig.tar.gz
SHA256=d79b4b06ef04be85fb890bf39d55942cc64c2e15fd14eaa32dae5dce94485484
SRC=$DIR/libuv1-$VERSION
OUT=$DIR/libuv-$VERSION-build

fetch "$URL" "$SHA256" "$(basename "$SRC")"

# Two source trees: libuv's own, and one whose threadpool.c is assembled around the shim.
rm -rf "$OUT/src-pool"
mkdir -p "$OUT"
cp -R "$SRC" "$OUT/src-pool"
awk -v shim="$ROOT/c_tests/external/uv_threadpool.c" '
    /^#define MAX_THREADPOOL_SIZE/ { head_done = 1 }
    !head_done { print; next }
    /^static void uv__cancelled/ { cancelled = 1 }
    cancelled { print; if ($0 ~ /^}/) { cancelled = 0; printf "\n#include \"%s\"\n\n", shim; n++ } next }
    /^void uv__work_done\(/ { tail = 1; n++ }
    tail { print }
    END { if (n != 2) exit 1 }
' "$SRC/src/threadpool.c" > "$OUT/src-pool/src/threadpool.c" || fail "assembling threadpool.c (libuv's layout changed?)"

build() { # build SOURCE_DIR BUILD_DIR [LIBS]
    "$CMAKE" -S "$1" -B "$2" -DCMAKE_POLICY_VERSION_MINIMUM=3.5 -DCMAKE_BUILD_TYPE=Release \
        -DCMAKE_C_COMPILER="$CC" -DLIBUV_BUILD_TESTS=ON -DLIBUV_BUILD_BENCH=OFF \
        -DCMAKE_C_STANDARD_LIBRARIES="${3:-}" > "$2.log" 2>&1 \
        && "$CMAKE" --build "$2" -j 2 --target uv_run_tests_a >> "$2.log" 2>&1 \
        || { tail -n 30 "$2.log"; fail "building libuv in $2"; }
}
echo "== libuv $VERSION with its own pool and with the shim (CMake)"
build "$SRC" "$OUT/build-own"
build "$OUT/src-pool" "$OUT/build-pool" "$LIB -lpthread -ldl -lm"

# A folder the tests may write in, and the user they run as.
RUN=$OUT/run
rm -rf "$RUN" && mkdir -p "$RUN"
cp "$OUT/build-own/uv_run_tests_a" "$RUN/uv-own"
cp "$OUT/build-pool/uv_run_tests_a" "$RUN/uv-pool"
mkdir -p "$RUN/test" && cp -R "$SRC/test/fixtures" "$RUN/test/" # files some fs tests read
AS=""
if [ "$(id -u)" = 0 ]; then
    chown -R nobody "$RUN"
    AS="setpriv --reuid=nobody --regid=nogroup --clear-groups"
fi
cd "$RUN"

echo "== libuv's test suite on the shim"
# shellcheck disable=SC2086
timeout 900 $AS ./uv-pool > "$OUT/suite.log" 2>&1 || true
passed=$(grep -c '^ok ' "$OUT/suite.log" || true)
planned=$(sed -n 's/^1\.\.\([0-9]*\)$/\1/p' "$OUT/suite.log" | head -n 1)
reported=$(grep -cE '^(not )?ok [0-9]+ - ' "$OUT/suite.log" || true)
[ -n "$planned" ] && [ "$reported" = "$planned" ] || { tail -n 30 "$OUT/suite.log"; fail "the suite stopped early: $reported of ${planned:-?} tests reported"; }
bad=0
for t in $(sed -n 's/^not ok [0-9]* - \(.*\)$/\1/p' "$OUT/suite.log"); do
    own_fails=0
    for i in 1 2 3; do
        # shellcheck disable=SC2086
        timeout 120 $AS ./uv-own "$t" > /dev/null 2>&1 || own_fails=$((own_fails + 1))
    done
    if [ "$own_fails" = 0 ]; then
        sed -n "/^not ok [0-9]* - $t\$/,/^ok /p" "$OUT/suite.log" | sed '$d'
        echo "external-libuv: $t fails on the shim and passes 3 of 3 on libuv's own pool"
        bad=$((bad + 1))
    else
        echo "not counted: $t (fails $own_fails of 3 on libuv's own pool here too)"
    fi
done
[ "$bad" = 0 ] || fail "$bad test(s) of libuv's suite fail on the shim only"
for t in threadpool_queue_work_simple threadpool_cancel_work threadpool_cancel_fs threadpool_cancel_getaddrinfo \
         threadpool_cancel_single threadpool_multiple_event_loops fork_threadpool_queue_work_simple; do
    grep -q "^ok [0-9]* - $t\$" "$OUT/suite.log" || fail "$t did not pass on the shim"
done
echo "libuv's suite on the shim: $passed tests passed"
echo "external-libuv: all green"
