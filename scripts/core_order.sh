#!/bin/sh
# The core's one-way order: a file of src/core/ calls internal functions
# (fkv__*) of the files on the lines before its own in the ```core-order
# block of docs/ARCHITECTURE.md, never of a file on its line or after it.
# Usage: scripts/core_order.sh [SOURCE_DIR]   (exit 0: clean, 1: a violation)
set -eu
root=${1:-$(dirname "$0")/..}
cd "$root"
order=$(awk '/^```core-order$/{on=1; next} /^```$/{on=0} on' docs/ARCHITECTURE.md)
[ -n "$order" ] || { echo "core_order: no \`\`\`core-order block in docs/ARCHITECTURE.md"; exit 1; }
rank_of() { # file name -> its line in the block, or empty
  printf '%s\n' "$order" | awk -v f="$1" '{for (i = 1; i <= NF; i++) if ($i == f) print NR}'
}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
# each file without its comments; the functions it defines (a name and
# "(" at the start of a line's declaration, the body's "{" on its own line
# or the same one)
for f in src/core/*.c; do
  b=$(basename "$f")
  [ -n "$(rank_of "$b")" ] || { echo "core_order: $f is in no line of the core-order block"; exit 1; }
  awk '{ line = $0; out = "";
         while (length(line)) {
           if (inc) { p = index(line, "*/"); if (!p) { line = ""; break } line = substr(line, p + 2); inc = 0 }
           else { p = index(line, "/*"); if (!p) { out = out line; line = ""; break }
                  out = out substr(line, 1, p - 1); line = substr(line, p + 2); inc = 1 } }
         print out }' "$f" > "$tmp/$b.src"
  grep -oE '^[a-z][a-z0-9_ *]*[ *]fkv__[a-z0-9_]+\(' "$tmp/$b.src" | grep -oE 'fkv__[a-z0-9_]+' |
    sed "s/\$/ $b/" >> "$tmp/defs"
done
bad=0
for f in src/core/*.c; do
  b=$(basename "$f")
  r=$(rank_of "$b")
  for fn in $(grep -oE '\bfkv__[a-z0-9_]+\(' "$tmp/$b.src" | tr -d '(' | sort -u); do
    d=$(awk -v n="$fn" '$1 == n {print $2; exit}' "$tmp/defs")
    [ -n "$d" ] && [ "$d" != "$b" ] || continue
    if [ "$(rank_of "$d")" -ge "$r" ]; then
      echo "$f: calls $fn of $d, which is not before it in the core's order"; bad=1
    fi
  done
done
[ "$bad" = 0 ] || { echo "core_order: FAILED"; exit 1; }
echo "core_order: $(ls src/core/*.c | wc -l) files, every internal call to a file before it"
