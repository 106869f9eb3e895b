#!/bin/sh
# The layering check: every #include "..." of src/ and tools/ must name a
# header of the file's own folder, of include/, or of a folder on a lower
# floor.  The floors are read from the ```layers block of
# docs/ARCHITECTURE.md, where they are written once.
# A header whose name contains "internal" (core/internal.h,
# sched/sched_internal.h, ...) is its folder's own: no other folder of src/
# or tools/ includes it.
# Usage: scripts/layering.sh [SOURCE_DIR]   (exit 0: clean, 1: a violation)
set -eu
root=${1:-$(dirname "$0")/..}
cd "$root"
floors=$(awk '/^```layers$/{on=1; next} /^```$/{on=0} on' docs/ARCHITECTURE.md)
[ -n "$floors" ] || { echo "layering: no \`\`\`layers block in docs/ARCHITECTURE.md"; exit 1; }
floor_of() { # folder -> floor, or empty
  printf '%s\n' "$floors" | awk -v d="$1" '{for (i = 2; i <= NF; i++) if ($i == d) print $1}'
}
bad=0
tmpbad=$(mktemp)
trap 'rm -f "$tmpbad"' EXIT
checked=0
for f in $(find src tools -name '*.[ch]' | sort); do
  dir=$(dirname "$f")
  own=$(floor_of "$dir")
  [ -n "$own" ] || { echo "layering: $dir (of $f) is on no floor of docs/ARCHITECTURE.md"; bad=1; continue; }
  # the quoted includes, with their line numbers
  grep -n '^[[:space:]]*#[[:space:]]*include[[:space:]]*"' "$f" | while IFS= read -r line; do
    n=${line%%:*}
    inc=$(printf '%s' "$line" | sed 's/^[^"]*"\([^"]*\)".*/\1/')
    case "$inc" in
      */*) ;;
      *) # a bare name: the file's own folder or include/
         if [ -f "$dir/$inc" ] || [ -f "include/$inc" ]; then continue; fi
         echo "$f:$n: includes \"$inc\", found neither in $dir/ nor in include/"; echo x >> "$tmpbad"; continue ;;
    esac
    case "$inc" in
      ../*|*/../*) echo "$f:$n: includes \"$inc\": a relative path up (name the folder from src/)"; echo x >> "$tmpbad"; continue ;;
    esac
    target="src/${inc%/*}"
    [ -f "src/$inc" ] || { echo "$f:$n: includes \"$inc\", which is not under src/"; echo x >> "$tmpbad"; continue; }
    [ "$target" = "$dir" ] && continue
    case "${inc##*/}" in
      *internal*.h) echo "$f:$n: includes \"$inc\": another folder's internal header (use its public one)"; echo x >> "$tmpbad"; continue ;;
    esac
    tf=$(floor_of "$target")
    if [ -z "$tf" ]; then
      echo "$f:$n: includes \"$inc\" from $target/, which is on no floor"; echo x >> "$tmpbad"
    elif [ "$tf" -ge "$own" ]; then
      echo "$f:$n: includes \"$inc\": $target/ is on floor $tf, $dir/ on floor $own (only lower floors)"; echo x >> "$tmpbad"
    fi
  done
  checked=$((checked + 1))
done
[ -s "$tmpbad" ] && bad=1
rm -f "$tmpbad"
[ "$bad" = 0 ] || { echo "layering: FAILED"; exit 1; }
echo "layering: $checked files, every include from its own folder, include/ or a lower floor"
