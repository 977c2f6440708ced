#!/bin/sh
# scripts/check_hooks.sh: fails if a hook variable of Note [Hooks]
# (src/core/core.h) is assigned outside the file the Note names for it, or
# if the Note names a hook no header declares.
status=0
list=$(sed -n 's/^ \*   \([a-z_]*_hook\): \(src\/[a-z_/]*\.c\)$/\1 \2/p' src/core/core.h)
[ -n "$list" ] || { echo "check: Note [Hooks] lists no hooks" >&2; exit 1; }
echo "$list" | while read -r hook file; do
  grep -q "(\*$hook)" src/core/core.h src/ops/op.h src/ops/collective.h ||
    { echo "Note [Hooks]: $hook is declared in no header" >&2; exit 1; }
  for f in $(grep -rlE "(^|[^a-z_.>])$hook[[:space:]]*=[^=]" src); do
    [ "$f" = "$file" ] || { echo "$f: assigns $hook (Note [Hooks] says only $file)" >&2; exit 1; }
  done
  grep -qE "(^|[^a-z_.>])$hook[[:space:]]*=[^=]" "$file" ||
    { echo "$file: does not assign $hook (Note [Hooks] says it does)" >&2; exit 1; }
done || status=1
# every hook a lower layer declares is in the Note
for hook in $(sed -n 's/^extern [^(]*(\*\([a-z_]*_hook\))(.*/\1/p' src/core/core.h src/ops/op.h src/ops/collective.h); do
  echo "$list" | grep -q "^$hook " ||
    { echo "$hook: declared but not listed in Note [Hooks]" >&2; status=1; }
done
[ $status -eq 0 ] && echo "check: hooks assigned only where Note [Hooks] says"
exit $status
