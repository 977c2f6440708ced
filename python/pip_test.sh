#!/bin/sh
# python/pip_test.sh: `pip install ./python` offline into a --target
# directory (Debian 12's pip refuses the system site without
# --break-system-packages), then the installed copy imports, finds its
# bundled libkiln.so and computes; `python3 -m kiln --version` runs.
set -eu
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cd "$(dirname "$0")/.."
# A copy of what setup.py reads, so that setuptools' build/ and egg-info
# stay out of the tree.
mkdir -p "$tmp/src/include" "$tmp/src/build"
cp -r python "$tmp/src/python"
cp include/kiln.h "$tmp/src/include/"
cp build/libkiln.so.*.*.* "$tmp/src/build/"
/usr/bin/python3 -m pip install --no-index --no-deps --no-build-isolation -q \
  --target "$tmp/site" "$tmp/src/python" >"$tmp/log" 2>&1 || { cat "$tmp/log" >&2; exit 1; }
ls "$tmp/site/kiln/" | grep -q '^libkiln.so' || { echo "pip_test: no bundled libkiln.so" >&2; exit 1; }
cd "$tmp"
out=$(env -u KILN_LIBRARY PYTHONPATH="$tmp/site" /usr/bin/python3 -c '
import kiln, os
assert kiln._lib.path.startswith(os.path.dirname(kiln.__file__)), kiln._lib.path
print(kiln.__version__, (kiln.tensor([1.0, 2.0]) * 3).tolist())')
[ "$out" = "$(sed -n 's/^#define KILN_VERSION_STRING "\(.*\)"/\1/p' "$OLDPWD/include/kiln.h") [3.0, 6.0]" ] ||
  { echo "pip_test: got '$out'" >&2; exit 1; }
env -u KILN_LIBRARY PYTHONPATH="$tmp/site" /usr/bin/python3 -m kiln --version | grep -q '^kiln ' 
echo "pip_test: ok ($out)"
