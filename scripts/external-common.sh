# scripts/external-common.sh: what the scripts/external-*.sh share. Each sets NAME (its name in
# messages) after `set -eu` and sources this file, which sets
#   ROOT  the repository; LIB: the script's first argument or target/release/libpool.a, made
#         absolute and checked to exist; CC: $CC or cc; DIR: target/external;
#   fail MESSAGE   prints "NAME: FAILED: MESSAGE" and exits 1;
#   fetch URL SHA256 FOLDER [MEMBER...]   downloads a source tarball into DIR once, checks its
#         SHA-256 and unpacks it there (into FOLDER, the folder it names; with MEMBERs, paths
#         inside it, only those: a large tree of which a test needs a few files). Later calls
#         find it unpacked.
ROOT=$(cd "$(dirname "$0")/.." && pwd)
CC=${CC:-cc}
DIR=$ROOT/target/external
fail() { echo "$NAME: FAILED: $*" >&2; exit 1; }
LIB=${1:-$ROOT/target/release/libpool.a}
[ -f "$LIB" ] || fail "no $LIB (run make lib)"
LIB=$(cd "$(dirname "$LIB")" && pwd)/$(basename "$LIB")

fetch() {
    fetch_url=$1 fetch_sha=$2 fetch_src=$3
    shift 3
    fetch_tarball=$(basename "$fetch_url")
    [ -f "$DIR/$fetch_src/.unpacked" ] && return 0
    mkdir -p "$DIR"
    if [ ! -f "$DIR/$fetch_tarball" ]; then
        curl -fsS --retry 3 -m 120 -o "$DIR/$fetch_tarball.part" "$fetch_url" || fail "download $fetch_url"
        mv "$DIR/$fetch_tarball.part" "$DIR/$fetch_tarball"
    fi
    echo "$fetch_sha  $DIR/$fetch_tarball" | sha256sum -c --quiet - \
        || { rm -f "$DIR/$fetch_tarball"; fail "checksum of $fetch_tarball"; }
    rm -rf "${DIR:?}/$fetch_src"
    tar -C "$DIR" -xf "$DIR/$fetch_tarball" "$@" || fail "unpacking $fetch_tarball"
    [ -d "$DIR/$fetch_src" ] || fail "$fetch_tarball has no folder $fetch_src"
    touch "$DIR/$fetch_src/.unpacked"
}
