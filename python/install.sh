#!/bin/sh
# python/install.sh PYTHON DIR LIBDIR: what `make install` does for the
# Python package: copies python/kiln/*.py into DIR/kiln (no pip, so
# `make uninstall` knows every file) and writes kiln/_libpath.py naming
# LIBDIR, where make install put libkiln.so.
set -e
py=$1 dir=$2 libdir=$3
src=$(dirname "$0")/kiln
install -d "$dir/kiln"
for f in "$src"/*.py; do install -m 644 "$f" "$dir/kiln/"; done
rm -f "$dir/kiln/_libpath.py"
printf '"""Written by make install: where libkiln.so is."""\nLIBDIR = %s\n' \
  "$("$py" -c 'import sys; print(repr(sys.argv[1]))' "$libdir")" > "$dir/kiln/_libpath.py"
"$py" -m compileall -q "$dir/kiln" >/dev/null 2>&1 || true
