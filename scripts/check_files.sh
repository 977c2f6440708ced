#!/bin/sh
# scripts/check_files.sh MAX: fails if a source file of src/ is longer than
# MAX lines (STYLE.md: files stay under about 1,000 lines), or if src/
# includes a header that only tests/ has (the library must build without
# the tests' -Itests).
max=$1
status=0
for f in src/*/*.c src/*/*.h; do
  n=$(wc -l < "$f")
  if [ "$n" -gt "$max" ]; then
    echo "$f: $n lines (limit $max)" >&2
    status=1
  fi
  dir=$(dirname "$f")
  for inc in $(sed -n 's/^#include "\([^"]*\)".*/\1/p' "$f"); do
    case "$inc" in *_text.h) continue ;; esac # generated into build/gen
    [ -f "$dir/$inc" ] || [ -f "src/$inc" ] || [ -f "include/$inc" ] || {
      if [ -f "tests/$inc" ] || [ -f "tests/$dir/$inc" ]; then
        echo "$f: includes \"$inc\" from tests/" >&2
      else
        echo "$f: includes \"$inc\", which is in none of its directory, src/, include/" >&2
      fi
      status=1
    }
  done
done
[ $status -eq 0 ] && echo "check: every src/ file under $max lines, none includes from tests/"
exit $status
