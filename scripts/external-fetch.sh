#!/bin/sh
# Fetches a source tarball for `make test-external` into DIR once, checks its SHA-256 and
# unpacks it there (into the folder the tarball names); later calls find it unpacked.
#   sh scripts/external-fetch.sh URL SHA256 DIR UNPACKED_FOLDER [MEMBER...]
# With MEMBERs (paths inside the tarball, under UNPACKED_FOLDER) only those are unpacked: a
# large source tree of which a test needs a few files.
set -eu
URL=$1 SHA256=$2 DIR=$3 SRC=$4
shift 4
TARBALL=$(basename "$URL")
fail() { echo "external-fetch: FAILED: $*" >&2; exit 1; }
[ -f "$DIR/$SRC/.unpacked" ] && exit 0
mkdir -p "$DIR"
if [ ! -f "$DIR/$TARBALL" ]; then
    curl -fsS --retry 3 -m 120 -o "$DIR/$TARBALL.part" "$URL" || fail "download $URL"
    mv "$DIR/$TARBALL.part" "$DIR/$TARBALL"
fi
echo "$SHA256  $DIR/$TARBALL" | sha256sum -c --quiet - || { rm -f "$DIR/$TARBALL"; fail "checksum of $TARBALL"; }
rm -rf "${DIR:?}/$SRC"
tar -C "$DIR" -xf "$DIR/$TARBALL" "$@" || fail "unpacking $TARBALL"
[ -d "$DIR/$SRC" ] || fail "$TARBALL has no folder $SRC"
touch "$DIR/$SRC/.unpacked"
