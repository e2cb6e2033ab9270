#!/bin/sh
# `make install` into a temporary prefix, check what was installed (links, soname, exported
# symbols, no debug info), then build and run programs against the installed copy only:
#   * README's C and C++ programs (README.md's "### C" under "## Quick start" and "### C++" under "## Hosts", so the
#     docs cannot drift from what works) with `pkg-config --libs pool-static` (libpool.a);
#   * examples/cmake/main.c with `pkg-config --libs pool` (libpool.so), run through an rpath
#     and, built without one, through LD_LIBRARY_PATH;
#   * examples/cmake as a CMake project: find_package(pool CONFIG), pool::pool shared and static.
set -eu
ROOT=$(cd "$(dirname "$0")/.." && pwd)
CC=${CC:-cc}
CXX=${CXX:-c++}
CMAKE=${CMAKE:-cmake}
# The make that installs: `make` (whose Makefile includes mk/embed.mk) unless told otherwise.
MAKE=${INSTALL_MAKE:-make}
TMP=$(mktemp -d "${TMPDIR:-/tmp}/pool-install.XXXXXX")
trap 'rm -rf "$TMP"' EXIT
PREFIX="$TMP/prefix"

cd "$ROOT"
$MAKE --no-print-directory install PREFIX="$PREFIX" >"$TMP/install.log" 2>&1 || {
    cat "$TMP/install.log"; echo "FAIL: make install PREFIX=$PREFIX"; exit 1; }
VERSION=$(sed -n 's/^version *= *"\(.*\)"/\1/p' Cargo.toml | head -n 1)
MAJOR=${VERSION%%.*}
for f in include/pool.h lib/libpool.a lib/libpool.so.$VERSION lib/pkgconfig/pool.pc \
         lib/pkgconfig/pool-static.pc lib/cmake/pool/poolConfig.cmake lib/cmake/pool/poolConfigVersion.cmake; do
    [ -f "$PREFIX/$f" ] || { echo "FAIL: $f not installed"; exit 1; }
done
[ "$(readlink "$PREFIX/lib/libpool.so.$MAJOR")" = "libpool.so.$VERSION" ] \
    || { echo "FAIL: lib/libpool.so.$MAJOR is not a link to libpool.so.$VERSION"; exit 1; }
[ "$(readlink "$PREFIX/lib/libpool.so")" = "libpool.so.$MAJOR" ] \
    || { echo "FAIL: lib/libpool.so is not a link to libpool.so.$MAJOR"; exit 1; }
echo "ok   make install PREFIX=... -> pool.h, libpool.a, libpool.so.$VERSION (+ .so.$MAJOR, .so), pool.pc, pool-static.pc, lib/cmake/pool"

SONAME=$(readelf -d "$PREFIX/lib/libpool.so.$VERSION" | sed -n 's/.*(SONAME).*\[\(.*\)\]/\1/p')
[ "$SONAME" = "libpool.so.$MAJOR" ] || { echo "FAIL: soname is '$SONAME', want libpool.so.$MAJOR"; exit 1; }
echo "ok   soname $SONAME"

# The shared library's dynamic symbol table: every defined symbol is a pool_* function.
nm -D --defined-only "$PREFIX/lib/libpool.so.$VERSION" | awk '{ print $NF }' > "$TMP/exported"
[ -s "$TMP/exported" ] || { echo "FAIL: libpool.so exports nothing"; exit 1; }
if grep -v '^pool_' "$TMP/exported" > "$TMP/stray"; then
    echo "FAIL: libpool.so exports symbols outside pool_*:"; head -n 20 "$TMP/stray"; exit 1
fi
# ... and every function pool.h declares is there.
sed -n 's/^[a-z].*[ *]\(pool_[a-z0-9_]*\)(.*/\1/p' "$PREFIX/include/pool.h" | sort -u > "$TMP/declared"
if ! sort -u "$TMP/exported" | comm -23 "$TMP/declared" - > "$TMP/missing" || [ -s "$TMP/missing" ]; then
    echo "FAIL: declared in pool.h but not exported:"; cat "$TMP/missing"; exit 1
fi
echo "ok   nm -D: $(wc -l < "$TMP/exported") symbols, all pool_*, every pool.h function among them"

for f in libpool.a libpool.so.$VERSION; do
    if readelf -S -W "$PREFIX/lib/$f" 2>/dev/null | grep -q '\.debug_info'; then
        echo "FAIL: lib/$f carries debug info (.debug_info)"; exit 1
    fi
done
echo "ok   no debug info: libpool.a $(du -k "$PREFIX/lib/libpool.a" | cut -f1) KiB, libpool.so $(du -k "$PREFIX/lib/libpool.so.$VERSION" | cut -f1) KiB"

# DESTDIR staging: files land under DESTDIR, paths inside pool.pc do not mention it.
$MAKE --no-print-directory install PREFIX=/opt/pool DESTDIR="$TMP/stage" >"$TMP/stage.log" 2>&1 || {
    cat "$TMP/stage.log"; echo "FAIL: make install DESTDIR=..."; exit 1; }
grep -q '^prefix=/opt/pool$' "$TMP/stage/opt/pool/lib/pkgconfig/pool.pc" \
    || { echo "FAIL: DESTDIR leaked into pool.pc"; exit 1; }
echo "ok   make install DESTDIR=... PREFIX=/opt/pool"

export PKG_CONFIG_PATH="$PREFIX/lib/pkgconfig"
[ "$(pkg-config --modversion pool)" = "$VERSION" ] || { echo "FAIL: pkg-config --modversion pool"; exit 1; }
SHARED_LIBS=$(pkg-config --libs pool)
STATIC_LIBS=$(pkg-config --libs pool-static)
PRIVATE=$(pkg-config --libs --static pool)
case "$SHARED_LIBS" in *-lpthread*) echo "FAIL: pkg-config --libs pool lists -lpthread (Libs.private belongs to --static)"; exit 1 ;; esac
for l in -lpool -lpthread -ldl -lm; do
    case " $PRIVATE " in *" $l "*) ;; *) echo "FAIL: pkg-config --libs --static pool lacks $l: $PRIVATE"; exit 1 ;; esac
done
CFLAGS_POOL=$(pkg-config --cflags pool)
echo "ok   pkg-config: --libs pool -> $SHARED_LIBS; --libs --static pool -> $PRIVATE; --libs pool-static -> $STATIC_LIBS"

# Extract the first ```LANG block after the heading $1 in README.md.
extract() {
    awk -v heading="$1" -v lang="$2" '
        $0 == heading { found = 1; next }
        found && !inblock && $0 == "```" lang { inblock = 1; next }
        inblock && $0 == "```" { exit }
        inblock { print }
    ' "$ROOT/README.md"
}
# Fails unless $1 has (yes) or lacks (no) a NEEDED entry for libpool.so.
needs_libpool() {
    if readelf -d "$2" | grep -q "NEEDED.*libpool\.so"; then has=yes; else has=no; fi
    [ "$has" = "$1" ] || { echo "FAIL: $2: NEEDED libpool.so is '$has', want '$1'"; exit 1; }
}

extract "### C" c > "$TMP/hello.c"
[ -s "$TMP/hello.c" ] || { echo "FAIL: no \`\`\`c block under '### C' in README.md"; exit 1; }
# Build from outside the source tree: only the installed files are visible.
(cd "$TMP" && $CC -std=c99 -Wall -Wextra -Werror hello.c $CFLAGS_POOL $STATIC_LIBS -o hello_c) \
    || { echo "FAIL: README's C program does not build against the installed pool"; exit 1; }
needs_libpool no "$TMP/hello_c"
"$TMP/hello_c" || { echo "FAIL: README's C program failed"; exit 1; }
echo "ok   README's C program built with pkg-config pool-static (libpool.a) and ran"

if command -v "$CXX" >/dev/null 2>&1; then
    extract "### C++" cpp > "$TMP/hello.cpp"
    if [ -s "$TMP/hello.cpp" ]; then
        (cd "$TMP" && $CXX -std=c++17 -Wall -Wextra -Werror hello.cpp $CFLAGS_POOL $STATIC_LIBS -o hello_cpp) \
            || { echo "FAIL: README's C++ program does not build against the installed pool"; exit 1; }
        "$TMP/hello_cpp" || { echo "FAIL: README's C++ program failed"; exit 1; }
        echo "ok   README's C++ program built with pkg-config pool-static and ran"
    fi
fi

# The shared library: with an rpath, and without one through LD_LIBRARY_PATH.
LIBDIR_PC=$(pkg-config --variable=libdir pool)
$CC -std=c99 -Wall -Wextra -Werror "$ROOT/examples/cmake/main.c" $CFLAGS_POOL $SHARED_LIBS \
    -Wl,-rpath,"$LIBDIR_PC" -o "$TMP/sum_rpath" || { echo "FAIL: building against libpool.so (rpath)"; exit 1; }
needs_libpool yes "$TMP/sum_rpath"
"$TMP/sum_rpath" >/dev/null || { echo "FAIL: the libpool.so program (rpath) failed"; exit 1; }
$CC -std=c99 -Wall -Wextra -Werror "$ROOT/examples/cmake/main.c" $CFLAGS_POOL $SHARED_LIBS \
    -o "$TMP/sum_env" || { echo "FAIL: building against libpool.so"; exit 1; }
if env -u LD_LIBRARY_PATH "$TMP/sum_env" >/dev/null 2>&1; then
    echo "FAIL: the program without rpath ran without LD_LIBRARY_PATH (a libpool.so outside the prefix?)"; exit 1
fi
LD_LIBRARY_PATH="$LIBDIR_PC" "$TMP/sum_env" >/dev/null || { echo "FAIL: the libpool.so program (LD_LIBRARY_PATH) failed"; exit 1; }
echo "ok   examples/cmake/main.c against libpool.so: ran through its rpath and through LD_LIBRARY_PATH"

# CMake: find_package(pool CONFIG) -> pool::pool, shared (default) and static (POOL_STATIC=ON).
for variant in shared static; do
    flag=OFF; [ "$variant" = static ] && flag=ON
    B="$TMP/cmake-$variant"
    "$CMAKE" -S "$ROOT/examples/cmake" -B "$B" -DCMAKE_PREFIX_PATH="$PREFIX" -DPOOL_STATIC=$flag \
        -DCMAKE_C_COMPILER="$CC" >"$B.log" 2>&1 && "$CMAKE" --build "$B" >>"$B.log" 2>&1 \
        || { cat "$B.log"; echo "FAIL: the CMake consumer ($variant) does not build"; exit 1; }
    if [ "$variant" = static ]; then needs_libpool no "$B/sum"; else needs_libpool yes "$B/sum"; fi
    "$B/sum" || { echo "FAIL: the CMake consumer ($variant) failed"; exit 1; }
    echo "ok   CMake find_package(pool CONFIG), pool::pool $variant: built and ran"
done
# The version file: an older major (or, at 0.x, another minor) is refused.
mkdir -p "$TMP/cmake-version"
cat > "$TMP/cmake-version/CMakeLists.txt" <<'CM'
cmake_minimum_required(VERSION 3.16)
project(v NONE)
find_package(pool 99.0 CONFIG QUIET)
if(pool_FOUND)
  message(FATAL_ERROR "find_package(pool 99.0) accepted version ${pool_VERSION}")
endif()
CM
"$CMAKE" -S "$TMP/cmake-version" -B "$TMP/cmake-version/b" -DCMAKE_PREFIX_PATH="$PREFIX" >"$TMP/cmv.log" 2>&1 \
    || { cat "$TMP/cmv.log"; echo "FAIL: poolConfigVersion.cmake accepted 99.0"; exit 1; }
echo "ok   CMake version file refuses 99.0"
echo "test-install: all passed"
