#!/bin/sh
# Fails when a declaration in pool.h (function, struct, struct field, enum value, typedef,
# POOL_* macro) has no doc comment ending on the line just above it.
#   sh scripts/check-header-docs.sh [include/pool.h]
set -eu
H=${1:-include/pool.h}
awk '
    /^(struct [a-z_]+( \{|;)|enum [a-z_]+ \{|typedef |#define POOL_[A-Z_]+ |[a-z][a-z_ ]*[ *]pool_[a-z0-9_]*\()/ \
        || /^  [A-Za-z_].*[;,]$/ {
        if ($0 ~ /^#define LIBPOOL_POOL_H/) { prev = $0; next }
        if (prev !~ /\*\/$/ && !(prev ~ /,$/ && cont)) { print FILENAME ":" NR ": undocumented: " $0; bad = 1 }
    }
    { cont = ($0 ~ /\($/ || ($0 ~ /,$/ && $0 !~ /^  [A-Z]/ && $0 ~ /\(/)) ; prev = $0 }
    END { exit bad }
' "$H" && echo "pool.h: every declaration documented"
