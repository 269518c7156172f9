#!/bin/sh
# docs/man: each page formats without a warning (groff -ww) and man reads it.
# usage: man_pages_test.sh SOURCE_DIR
set -eu
for page in "$1/docs/man/tollgate.8" "$1/docs/man/tollgate.toml.5"; do
  warnings=$(groff -man -Tutf8 -ww -z "$page" 2>&1)
  if [ -n "$warnings" ]; then
    echo "FAIL: $page: $warnings"
    exit 1
  fi
  MANWIDTH=80 man -l "$page" >/dev/null
done
