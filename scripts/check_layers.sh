#!/bin/sh
# scripts/check_layers.sh LAYER...: fails if a file in src/<layer>/ includes
# a header of a layer that comes later in the list (layers are given
# bottom-up), i.e. if a lower layer reaches up.
status=0
i=0
for layer in "$@"; do
  eval "rank_$layer=$i"
  i=$((i + 1))
done
for layer in "$@"; do
  eval "mine=\$rank_$layer"
  for f in src/"$layer"/*.c src/"$layer"/*.h; do
    [ -f "$f" ] || continue
    for inc in $(sed -n 's/^#include "\([a-z_]*\)\/.*"/\1/p' "$f"); do
      eval "theirs=\${rank_$inc:-}"
      if [ -n "$theirs" ] && [ "$theirs" -gt "$mine" ]; then
        echo "$f: includes a header of layer '$inc', above '$layer'" >&2
        status=1
      fi
    done
  done
done
[ $status -eq 0 ] && echo "check: layering ok ($*)"
exit $status
