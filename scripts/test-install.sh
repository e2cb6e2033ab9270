#!/bin/sh
# `make install` into a temporary prefix, then build and run programs against the installed
# copy using only `pkg-config --cflags --libs pool`: the README's shortest C program (and the
# C++ one when a C++ compiler is there), taken from README.md's "## Hosts" section so the docs
# cannot drift from what works.
set -eu
ROOT=$(cd "$(dirname "$0")/.." && pwd)
CC=${CC:-cc}
CXX=${CXX:-c++}
# The make that installs: `make` (whose Makefile includes mk/embed.mk) unless told otherwise.
MAKE=${INSTALL_MAKE:-make}
TMP=$(mktemp -d "${TMPDIR:-/tmp}/pool-install.XXXXXX")
trap 'rm -rf "$TMP"' EXIT
PREFIX="$TMP/prefix"

cd "$ROOT"
$MAKE --no-print-directory install PREFIX="$PREFIX" >"$TMP/install.log" 2>&1 || {
    cat "$TMP/install.log"; echo "FAIL: make install PREFIX=$PREFIX"; exit 1; }
for f in include/pool.h lib/libpool.a lib/pkgconfig/pool.pc; do
    [ -f "$PREFIX/$f" ] || { echo "FAIL: $f not installed"; exit 1; }
done
echo "ok   make install PREFIX=... -> pool.h, libpool.a, pool.pc"

# DESTDIR staging: files land under DESTDIR, paths inside pool.pc do not mention it.
$MAKE --no-print-directory install PREFIX=/opt/pool DESTDIR="$TMP/stage" >"$TMP/stage.log" 2>&1 || {
    cat "$TMP/stage.log"; echo "FAIL: make install DESTDIR=..."; exit 1; }
grep -q '^prefix=/opt/pool$' "$TMP/stage/opt/pool/lib/pkgconfig/pool.pc" \
    || { echo "FAIL: DESTDIR leaked into pool.pc"; exit 1; }
echo "ok   make install DESTDIR=... PREFIX=/opt/pool"

export PKG_CONFIG_PATH="$PREFIX/lib/pkgconfig"
FLAGS=$(pkg-config --cflags --libs pool)
VERSION=$(pkg-config --modversion pool)
echo "ok   pkg-config --cflags --libs pool -> $FLAGS (version $VERSION)"

# Extract the first ```LANG block after the heading $1 in README.md.
extract() {
    awk -v heading="$1" -v lang="$2" '
        $0 == heading { found = 1; next }
        found && !inblock && $0 == "```" lang { inblock = 1; next }
        inblock && $0 == "```" { exit }
        inblock { print }
    ' "$ROOT/README.md"
}

extract "### C" c > "$TMP/hello.c"
[ -s "$TMP/hello.c" ] || { echo "FAIL: no \`\`\`c block under '### C' in README.md"; exit 1; }
# Build from outside the source tree: only the installed files are visible.
(cd "$TMP" && $CC -std=c99 -Wall -Wextra -Werror hello.c $FLAGS -o hello_c) \
    || { echo "FAIL: README's C program does not build against the installed pool"; exit 1; }
"$TMP/hello_c" || { echo "FAIL: README's C program failed"; exit 1; }
echo "ok   README's C program built with pkg-config and ran"

if command -v "$CXX" >/dev/null 2>&1; then
    extract "### C++" cpp > "$TMP/hello.cpp"
    if [ -s "$TMP/hello.cpp" ]; then
        (cd "$TMP" && $CXX -std=c++17 -Wall -Wextra -Werror hello.cpp $FLAGS -o hello_cpp) \
            || { echo "FAIL: README's C++ program does not build against the installed pool"; exit 1; }
        "$TMP/hello_cpp" || { echo "FAIL: README's C++ program failed"; exit 1; }
        echo "ok   README's C++ program built with pkg-config and ran"
    fi
fi
echo "test-install: all passed"
