#!/bin/sh
# Installs the tools `make test` needs, or fails naming the one that is missing.
#   sh scripts/tools.sh all | targets | clippy | nightly | miri | fuzz | valgrind | lsan | zig | cmake | pkg-config | samba-deps
# Each step is a no-op (well under a second) when the tool is already there, so every suite
# that needs a tool calls its step first (`make tools` runs them all; `make test` depends on it).
# What it installs, and from where:
#   rustup targets thumbv7em-none-eabihf thumbv6m-none-eabi riscv32imc-unknown-none-elf (stable)
#   rustup component clippy (stable)
#   rustup toolchain nightly with the components miri and rust-src (Miri, TSan's -Zbuild-std)
#   cargo-fuzz (cargo +nightly install cargo-fuzz --locked; ~1 min to build on 2 cores)
#   valgrind (apt-get, only when run as root; otherwise install it yourself)
#   Zig 0.17 and CMake (python3 -m pip; the PyPI packages ziglang and cmake)
#   the libraries Samba's pthreadpool tests link (`make test-external`): tevent, talloc and
#   cmocka with their headers (apt-get libtevent-dev libtalloc-dev libcmocka-dev, as root)
set -eu
ROOT=$(cd "$(dirname "$0")/.." && pwd)
PIP="python3 -m pip install --quiet --disable-pip-version-check"
ZIG_SPEC='ziglang>=0.17,<0.18'
CMAKE_SPEC='cmake>=3.20'

fail() {
    echo "make tools: MISSING: $1" >&2
    echo "make tools: $2" >&2
    exit 1
}

need() { command -v "$1" >/dev/null 2>&1; }

# apt_install WHAT PACKAGE...: as root where apt-get exists, installs the packages (failing
# with WHAT named if apt-get does); otherwise does nothing, and the caller's check says what
# is missing.
apt_install() {
    what=$1
    shift
    if [ "$(id -u)" = 0 ] && need apt-get; then
        echo "make tools: installing $* (apt-get)"
        { apt-get update -qq && apt-get install -y -qq "$@"; } >/dev/null || fail "$what" "apt-get install $*"
    fi
}

t_targets() {
    need rustup || fail "rustup" "install Rust with rustup (https://rustup.rs)"
    installed=$(rustup target list --installed)
    for t in thumbv7em-none-eabihf thumbv6m-none-eabi riscv32imc-unknown-none-elf; do
        case "$installed" in *"$t"*) ;; *)
            rustup target add "$t" || fail "rust target $t" "rustup target add $t" ;;
        esac
    done
}

t_clippy() {
    need rustup || fail "rustup" "install Rust with rustup (https://rustup.rs)"
    case "$(rustup component list --installed)" in *clippy*) ;; *)
        rustup component add clippy || fail "clippy" "rustup component add clippy" ;;
    esac
}

t_nightly() {
    need rustup || fail "rustup" "install Rust with rustup (https://rustup.rs)"
    if ! rustup run nightly rustc --version >/dev/null 2>&1; then
        rustup toolchain install nightly --profile minimal \
            || fail "nightly toolchain" "rustup toolchain install nightly --profile minimal"
    fi
    comps=$(rustup component list --toolchain nightly --installed)
    for c in miri rust-src; do
        case "$comps" in *"$c"*) ;; *)
            rustup component add "$c" --toolchain nightly \
                || fail "nightly component $c" "rustup component add $c --toolchain nightly" ;;
        esac
    done
}

t_miri() {
    t_nightly
    cargo +nightly miri --version >/dev/null 2>&1 \
        || fail "cargo miri" "rustup component add miri --toolchain nightly"
    # Builds Miri's std once (~40 s); quiet afterwards.
    cargo +nightly miri setup >/dev/null 2>&1 || fail "miri sysroot" "cargo +nightly miri setup"
}

t_fuzz() {
    t_nightly
    if ! cargo +nightly fuzz --version >/dev/null 2>&1; then
        echo "make tools: installing cargo-fuzz (cargo +nightly install cargo-fuzz --locked)"
        cargo +nightly install cargo-fuzz --locked \
            || fail "cargo-fuzz" "cargo +nightly install cargo-fuzz --locked"
    fi
}

t_valgrind() {
    need valgrind && return 0
    apt_install valgrind valgrind
    need valgrind || fail "valgrind" "install valgrind with your package manager (apt-get install valgrind)"
}

t_lsan() {
    cc=${CC:-cc}
    tmp=$(mktemp -d "${TMPDIR:-/tmp}/pool-lsan.XXXXXX")
    if ! echo 'int main(void) { return 0; }' | $cc -fsanitize=leak -x c - -o "$tmp/probe" 2>/dev/null; then
        rm -rf "$tmp"
        fail "LeakSanitizer runtime for $cc" "install gcc's liblsan (apt-get install gcc) or set CC to a compiler that links -fsanitize=leak"
    fi
    rm -rf "$tmp"
}

t_python_pip() {
    need python3 || fail "python3" "install Python 3 with pip (apt-get install python3-pip)"
    python3 -m pip --version >/dev/null 2>&1 || fail "pip" "install pip for python3 (apt-get install python3-pip)"
}

t_zig() {
    case $(python3 -m ziglang version 2>/dev/null) in 0.17.*) return 0 ;; esac
    t_python_pip
    echo "make tools: installing Zig ($PIP '$ZIG_SPEC')"
    $PIP "$ZIG_SPEC" || fail "Zig 0.17" "python3 -m pip install '$ZIG_SPEC'"
    case $(python3 -m ziglang version 2>/dev/null) in 0.17.*) ;; *)
        fail "Zig 0.17" "'python3 -m ziglang version' does not print 0.17.x after pip install" ;;
    esac
}

# Prints the cmake to use: one on PATH (3.20 or later), else the PyPI one.
t_cmake_path() {
    if need cmake && cmake --version | awk 'NR==1 { split($3, v, "."); exit !(v[1] > 3 || (v[1] == 3 && v[2] >= 20)) }'; then
        command -v cmake; return 0
    fi
    scripts=$(python3 -c 'import sysconfig; print(sysconfig.get_path("scripts"))' 2>/dev/null) || return 1
    [ -x "$scripts/cmake" ] && echo "$scripts/cmake"
}

t_cmake() {
    t_cmake_path >/dev/null 2>&1 && return 0
    t_python_pip
    echo "make tools: installing CMake ($PIP '$CMAKE_SPEC')"
    $PIP "$CMAKE_SPEC" || fail "cmake" "python3 -m pip install '$CMAKE_SPEC' (or your package manager)"
    t_cmake_path >/dev/null || fail "cmake" "pip installed cmake but it is not in $(python3 -c 'import sysconfig; print(sysconfig.get_path("scripts"))')"
}

t_pkg_config() {
    need pkg-config && return 0
    if [ "$(id -u)" = 0 ] && need apt-get; then
        { apt-get update -qq && apt-get install -y -qq pkg-config; } >/dev/null || true
    fi
    need pkg-config || fail "pkg-config" "install pkg-config with your package manager (apt-get install pkg-config)"
}

t_samba_deps() {
    t_pkg_config
    pkg-config --exists tevent talloc cmocka && return 0
    apt_install "tevent, talloc, cmocka" libtevent-dev libtalloc-dev libcmocka-dev
    pkg-config --exists tevent talloc cmocka || fail "tevent, talloc, cmocka (with headers)" \
        "install them with your package manager (apt-get install libtevent-dev libtalloc-dev libcmocka-dev)"
}

cd "$ROOT"
case ${1:-all} in
    all) t_targets; t_clippy; t_nightly; t_miri; t_fuzz; t_valgrind; t_lsan; t_zig; t_cmake; t_pkg_config; t_samba_deps
         echo "make tools: everything make test needs is installed" ;;
    targets) t_targets ;;
    clippy) t_clippy ;;
    nightly) t_nightly ;;
    miri) t_miri ;;
    fuzz) t_fuzz ;;
    valgrind) t_valgrind ;;
    lsan) t_lsan ;;
    zig) t_zig ;;
    cmake) t_cmake ;;
    cmake-path) t_cmake >&2; t_cmake_path ;;
    pkg-config) t_pkg_config ;;
    samba-deps) t_samba_deps ;;
    *) echo "usage: sh scripts/tools.sh all|targets|nightly|miri|fuzz|valgrind|lsan|zig|cmake|cmake-path|pkg-config|samba-deps" >&2; exit 2 ;;
esac
