#!/bin/sh
# tests/tools/install_test.sh: kiln as a user gets it. make install into a
# fresh PREFIX (and a DESTDIR staging copy), then the external C and C++
# programs of tests/tools/external build with plain `pkg-config --cflags
# --libs kiln` (shared library) and with `--static ... -static` (the
# archive), and run; libkiln.so exports only kiln_ symbols and has its
# soname; make uninstall removes every file install wrote.
# Usage: sh tests/tools/install_test.sh [BUILD_DIR]   (run from the tree's top)
set -eu
unset MAKEFLAGS MFLAGS MAKELEVEL  # run from make test: a make of its own
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
say() { echo "install_test: $*" >&2; }
# With the Python package when /usr/bin/python3 has numpy (else PYTHON=).
py=; /usr/bin/python3 -c 'import numpy' 2>/dev/null && py=/usr/bin/python3
make -s install PREFIX="$tmp/prefix" PYTHON=$py >"$tmp/log" 2>&1 || { cat "$tmp/log" >&2; say "make install failed"; exit 1; }
P="$tmp/prefix"
if [ -n "$py" ]; then
  site=$(echo "$P"/lib/python3.*/dist-packages)
  out=$(cd "$tmp" && env -u KILN_LIBRARY PYTHONPATH="$site" $py -c '
import kiln; print(kiln._lib.path, (kiln.ones(2) + 1).tolist())')
  [ "$out" = "$P/lib/libkiln.so.0 [2.0, 2.0]" ] || { say "installed python package: '$out'"; exit 1; }
fi
for f in include/kiln.h lib/libkiln.a lib/libkiln.so lib/libkiln.so.0 lib/pkgconfig/kiln.pc \
         bin/kiln share/man/man1/kiln.1; do
  [ -e "$P/$f" ] || { say "missing $f"; exit 1; }
done
real=$(readlink -f "$P/lib/libkiln.so")
soname=$(readelf -d "$real" | sed -n 's/.*Library soname: \[\(.*\)\]/\1/p')
[ "$soname" = "libkiln.so.0" ] || { say "soname '$soname'"; exit 1; }
bad=$(nm -D --defined-only "$real" | awk '{print $NF}' | grep -v '^kiln_' || true)
[ -z "$bad" ] || { say "exported symbols not named kiln_: $bad"; exit 1; }
n=$(nm -D --defined-only "$real" | wc -l)
[ "$n" -gt 200 ] || { say "only $n exported symbols"; exit 1; }
export PKG_CONFIG_PATH="$P/lib/pkgconfig"
ver=$("$P/bin/kiln" --version | head -1)
case "$ver" in "kiln $(pkg-config --modversion kiln)"*) ;; *) say "kiln --version: '$ver'"; exit 1;; esac
E=tests/tools/external
cc -o "$tmp/c_shared" $E/prog.c $(pkg-config --cflags --libs kiln)
c++ -o "$tmp/cc_shared" $E/prog.cc $(pkg-config --cflags --libs kiln)
# The static link warns that dlopen (native fused kernels) needs glibc's
# shared libraries at run time; that is expected.
cc -o "$tmp/c_static" $E/prog.c $(pkg-config --cflags --static --libs kiln) -static 2>"$tmp/ld.log" ||
  { cat "$tmp/ld.log" >&2; say "static C link failed"; exit 1; }
c++ -o "$tmp/cc_static" $E/prog.cc $(pkg-config --cflags --static --libs kiln) -static 2>"$tmp/ld.log" ||
  { cat "$tmp/ld.log" >&2; say "static C++ link failed"; exit 1; }
for p in c_shared cc_shared; do
  readelf -d "$tmp/$p" | grep -q 'NEEDED.*libkiln.so.0' || { say "$p does not use libkiln.so.0"; exit 1; }
  LD_LIBRARY_PATH="$P/lib" "$tmp/$p" | grep -q '^ok' || { say "$p failed"; exit 1; }
done
for p in c_static cc_static; do
  if readelf -d "$tmp/$p" 2>/dev/null | grep -q NEEDED; then say "$p is not static"; exit 1; fi
  "$tmp/$p" | grep -q '^ok' || { say "$p failed"; exit 1; }
done
# DESTDIR stages the same tree under another root; uninstall leaves no file.
make -s install PREFIX=/opt/kiln DESTDIR="$tmp/stage" PYTHON= >"$tmp/log" 2>&1 || { cat "$tmp/log" >&2; exit 1; }
grep -q '^prefix=/opt/kiln$' "$tmp/stage/opt/kiln/lib/pkgconfig/kiln.pc" || { say "DESTDIR .pc prefix"; exit 1; }
make -s uninstall PREFIX=/opt/kiln DESTDIR="$tmp/stage" PYTHON= >/dev/null 2>&1
left=$(find "$tmp/stage" -type f -o -type l)
[ -z "$left" ] || { say "uninstall left: $left"; exit 1; }
make -s uninstall PREFIX="$P" PYTHON=$py >/dev/null 2>&1
left=$(find "$P" -type f -o -type l)
[ -z "$left" ] || { say "uninstall left: $left"; exit 1; }
echo "install_test: ok"
