#!/bin/bash
# Mutation check: does the test suite notice small, deliberate bugs?
#
#   scripts/mutate.sh [-l LIST] [-j JOBS] [-t SECONDS] [-A] [-H] [-k] [-o FILE] [ID...]
#
#   -l LIST     mutation list (default scripts/mutations.txt)
#   -j JOBS     parallel jobs for the build and for ctest (default 2)
#   -t SECONDS  time limit of one test run, i.e. one ctest call (default 300);
#               a mutation whose tests run past it counts as killed (timeout)
#   -A          every mutation runs the whole suite, whatever its `tests:`
#   -H          test the committed HEAD instead of the working tree (the list
#               is still the one -l names)
#   -k          keep the scratch directory (sources, build, logs) and say where
#   -o FILE     also write the result table to FILE
#   ID...       run only these mutations (default: all of the list)
#
# Not part of CI: it builds once, then rebuilds and tests once per mutation
# (about 20 s each on two cores).
#
# What it does.  The source tree is copied to a scratch directory outside
# it (mktemp -d): by default the working tree as it is, tracked and untracked
# files that git does not ignore, so uncommitted work is what gets tested;
# with -H, `git archive HEAD`.  The tests find ../shared/data relative to the
# sources, so the scratch copy gets a `shared` link beside it.  Only the copy
# is ever mutated: the source tree is read, never written, whatever happens
# (Ctrl-C included; the trap also removes the scratch directory).  The copy
# is configured like the release build (RelWithDebInfo, FKV_WERROR=ON) and
# built once, and the whole suite must pass on it.  Then, per mutation: the
# fragment is replaced in the copy, the build is redone incrementally, the
# mutation's tests run (`ctest -j JOBS --stop-on-failure`), the file is put
# back.  The result:
#   KILLED    a test failed (which one is shown), the tests ran past the
#             time limit (timeout), or the build broke (build; warnings are
#             errors, so a mutation should compile cleanly to be useful);
#   SURVIVED  every test passed: a gap in the tests, unless the entry is
#             marked `equivalent:` (the change cannot be observed).
# The table comes last.  Exit status: 0 when nothing survived that is not
# marked equivalent, 1 when something did, 2 on a usage error, a broken list,
# or a baseline that does not build or pass.
#
# The list.  Entries are blocks of `key: value` lines separated by blank
# lines; `#` starts a comment line.  Values are taken verbatim after the
# colon, less surrounding white space.
#   id:          a unique name (letters, digits, . _ -)
#   file:        the file to mutate, relative to the repository root
#   find:        an exact fragment of one source line; it must occur exactly
#                once in the file, or the whole run stops before building,
#                so an entry cannot silently go stale as the code changes
#   replace:     what replaces it (may be empty: the fragment is deleted)
#   tests:       `all`, or the ctest names (space-separated) that should
#                catch it; names that are not tests stop the run.  A subset
#                makes the check fast; confirm a survivor with -A.
#   note:        one line: what the mutation breaks
#   equivalent:  optional; why the mutation cannot change behaviour.  An
#                equivalent survivor does not make the run fail.
set -u

usage()
{
    sed -n '3,15p' "$0" | sed 's/^# \{0,1\}//' >&2
    exit 2
}

die()
{
    echo "mutate: $*" >&2
    exit 2
}

SRC=$(git -C "$(dirname "$0")/.." rev-parse --show-toplevel 2>/dev/null) || die "not inside a git checkout"
LIST=$SRC/scripts/mutations.txt
JOBS=2
TLIMIT=300
ALL_TESTS=0
HEAD_ONLY=0
KEEP=0
REPORT=
while getopts "l:j:t:AHko:h" opt; do
    case $opt in
    l) LIST=$OPTARG ;;
    j) JOBS=$OPTARG ;;
    t) TLIMIT=$OPTARG ;;
    A) ALL_TESTS=1 ;;
    H) HEAD_ONLY=1 ;;
    k) KEEP=1 ;;
    o) REPORT=$OPTARG ;;
    *) usage ;;
    esac
done
shift $((OPTIND - 1))
[[ $JOBS =~ ^[1-9][0-9]*$ ]] || die "-j needs a positive number"
[[ $TLIMIT =~ ^[1-9][0-9]*$ ]] || die "-t needs a positive number of seconds"
[ -f "$LIST" ] || die "no list file $LIST"
LIST=$(cd "$(dirname "$LIST")" && pwd)/$(basename "$LIST")
case $REPORT in "" | /*) ;; *) REPORT=$PWD/$REPORT ;; esac
for tool in cmake ctest perl timeout tar; do
    command -v $tool >/dev/null || die "$tool not found"
done

# ---------------------------------------------------------------- the list

ids=() files=() finds=() repls=() tests=() notes=() equivs=()
parse_list()
{
    local n=0 line key val cur=-1 lineno=0
    local -A seen=()
    flush()
    {
        [ $cur -lt 0 ] && return
        [ -n "${ids[cur]}" ] || die "$LIST: an entry before line $lineno has no id"
        [ -n "${files[cur]}" ] || die "$LIST: ${ids[cur]}: no file"
        [ -n "${finds[cur]}" ] || die "$LIST: ${ids[cur]}: no find"
        [ "${finds[cur]}" != "${repls[cur]}" ] || die "$LIST: ${ids[cur]}: replace equals find"
        [ -n "${tests[cur]}" ] || tests[cur]=all
        cur=-1
    }
    while IFS= read -r line || [ -n "$line" ]; do
        lineno=$((lineno + 1))
        line=${line%$'\r'}
        if [[ $line =~ ^[[:space:]]*$ ]]; then flush; continue; fi
        [[ $line =~ ^[[:space:]]*# ]] && continue
        [[ $line =~ ^([a-z]+):(.*)$ ]] || die "$LIST:$lineno: not a 'key: value' line"
        key=${BASH_REMATCH[1]}
        val=${BASH_REMATCH[2]}
        val=${val#"${val%%[![:space:]]*}"}
        val=${val%"${val##*[![:space:]]}"}
        if [ $cur -lt 0 ]; then
            cur=$n
            n=$((n + 1))
            ids[cur]= files[cur]= finds[cur]= repls[cur]= tests[cur]= notes[cur]= equivs[cur]=
            [ "$key" = id ] || die "$LIST:$lineno: an entry must start with id:"
        fi
        case $key in
        id)
            [[ $val =~ ^[A-Za-z0-9._-]+$ ]] || die "$LIST:$lineno: bad id '$val'"
            [ -z "${seen[$val]:-}" ] || die "$LIST:$lineno: id $val used twice"
            seen[$val]=1
            ids[cur]=$val ;;
        file) files[cur]=$val ;;
        find) finds[cur]=$val ;;
        replace) repls[cur]=$val ;;
        tests) tests[cur]=$val ;;
        note) notes[cur]=$val ;;
        equivalent) [ -n "$val" ] || die "$LIST:$lineno: equivalent needs a reason"
                    equivs[cur]=$val ;;
        *) die "$LIST:$lineno: unknown key '$key'" ;;
        esac
    done < "$LIST"
    flush
    [ $n -gt 0 ] || die "$LIST: no mutations"
}
parse_list

# occurrences of the literal $2 in file $1
count_in()
{
    FIND=$2 perl -0777 -ne '$n = 0; $p = 0; while (($p = index($_, $ENV{FIND}, $p)) >= 0) { $n++; $p++; } print $n' "$1"
}

# replaces the one occurrence of $2 in file $1 by $3 (in place, new mtime)
apply_in()
{
    FIND=$2 REPL=$3 perl -0777 -i -pe 'my $p = index($_, $ENV{FIND}); die "fragment gone\n" if $p < 0; substr($_, $p, length $ENV{FIND}) = $ENV{REPL};' "$1"
}

# the selection: every entry, or the ids named
sel=()
if [ $# -eq 0 ]; then
    for i in "${!ids[@]}"; do sel+=("$i"); done
else
    for want in "$@"; do
        found=
        for i in "${!ids[@]}"; do [ "${ids[i]}" = "$want" ] && found=$i; done
        [ -n "$found" ] || die "no mutation with id '$want' in $LIST"
        sel+=("$found")
    done
fi

# ---------------------------------------------------------------- scratch copy

SCRATCH=
CHILD=
MUTATED=
cleanup()
{
    if [ -n "$CHILD" ]; then
        kill -TERM -- "-$CHILD" 2>/dev/null
        wait "$CHILD" 2>/dev/null
    fi
    [ -n "$MUTATED" ] && cat "$SCRATCH/orig" > "$MUTATED" 2>/dev/null
    if [ -n "$SCRATCH" ]; then
        if [ $KEEP = 1 ]; then echo "mutate: scratch kept in $SCRATCH" >&2
        else rm -rf "$SCRATCH"; fi
    fi
}
trap 'cleanup' EXIT
trap 'echo "mutate: interrupted" >&2; exit 130' INT TERM HUP

# run_bg LOG CMD...: runs CMD as a background job, output appended to LOG,
# and waits for it.  Job control (set -m) gives each job its own process
# group, so the trap can end a build or a test run with everything it
# started; and `wait`, unlike a foreground command, returns as soon as a
# signal arrives.
set -m
run_bg()
{
    local log=$1
    shift
    "$@" >> "$log" 2>&1 &
    CHILD=$!
    wait "$CHILD"
    local rc=$?
    CHILD=
    return $rc
}

SCRATCH=$(mktemp -d "${TMPDIR:-/tmp}/fairkv-mutate.XXXXXX") || die "mktemp failed"
case $SCRATCH/ in "$SRC"/*) die "scratch $SCRATCH is inside the source tree (set TMPDIR)" ;; esac
TREE=$SCRATCH/src
BUILD=$SCRATCH/build
LOGS=$SCRATCH/logs
mkdir -p "$TREE" "$LOGS"
if [ $HEAD_ONLY = 1 ]; then
    git -C "$SRC" archive HEAD | tar -x -C "$TREE" || die "git archive failed"
    what="HEAD $(git -C "$SRC" rev-parse --short HEAD)"
else
    # tracked and untracked-but-not-ignored files, as they are now (a
    # tracked file deleted in the working tree stays deleted)
    git -C "$SRC" ls-files -z --cached --others --exclude-standard |
        (cd "$SRC" && while IFS= read -r -d '' f; do [ -f "$f" ] || [ -L "$f" ] && printf '%s\0' "$f"; done) |
        tar -C "$SRC" --null -T - -cf - | tar -C "$TREE" -xf - || die "copying the working tree failed"
    what="working tree at $(git -C "$SRC" rev-parse --short HEAD)"
    [ -n "$(git -C "$SRC" status --porcelain)" ] && what="$what plus uncommitted changes"
fi
[ -e "$SRC/../shared" ] && ln -s "$(cd "$SRC/../shared" && pwd)" "$SCRATCH/shared"

# every entry of the list, selected or not, must still apply to the code
bad=0
for i in "${!ids[@]}"; do
    f=$TREE/${files[i]}
    if [ ! -f "$f" ]; then
        echo "mutate: ${ids[i]}: no file ${files[i]}" >&2
        bad=1
        continue
    fi
    k=$(count_in "$f" "${finds[i]}")
    if [ "$k" != 1 ]; then
        echo "mutate: ${ids[i]}: '${finds[i]}' occurs $k times in ${files[i]} (must be exactly once)" >&2
        bad=1
    fi
done
[ $bad = 0 ] || die "the list no longer matches the code: fix $LIST"

echo "mutate: $what, ${#sel[@]} of ${#ids[@]} mutations, scratch $SCRATCH"
T0=$(date +%s)
echo "mutate: configuring and building once (log: build-base.log)"
run_bg "$LOGS/build-base.log" cmake -S "$TREE" -B "$BUILD" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DFKV_WERROR=ON &&
    run_bg "$LOGS/build-base.log" cmake --build "$BUILD" -j "$JOBS" ||
    { tail -20 "$LOGS/build-base.log" >&2; die "the unmutated copy does not build"; }

# the test names, to check the subsets of the list against
mapfile -t known < <(cd "$BUILD" && ctest -N | sed -n 's/^ *Test *#[0-9]*: *//p')
for i in "${sel[@]}"; do
    [ "${tests[i]}" = all ] && continue
    for t in ${tests[i]}; do
        ok=0
        for k in "${known[@]}"; do [ "$k" = "$t" ] && ok=1; done
        [ $ok = 1 ] || die "${ids[i]}: '$t' is not a test of this build"
    done
done

# Runs the tests $1 ("all" or names), log in $2; sets FAILED to "" when
# they pass, else to what failed.  The time limit is on the whole ctest
# call: ctest's own --timeout does not override the TIMEOUT the tests have.
FAILED=
run_tests()
{
    local sel=$1 log=$2 limit=${3:-$TLIMIT} rc
    local args=(-j "$JOBS" --stop-on-failure --output-on-failure --no-tests=error)
    if [ "$sel" != all ]; then
        local re
        re=$(echo "$sel" | tr -s ' ' '|')
        args+=(-R "^($re)\$")
    fi
    cd "$BUILD" || die "no build directory"
    : > "$log"
    run_bg "$log" timeout -k 10 "$limit" ctest "${args[@]}"
    rc=$?
    cd "$SCRATCH" || die "no scratch directory"
    if [ $rc = 0 ]; then
        FAILED=
    elif [ $rc = 124 ] || [ $rc = 137 ]; then
        FAILED="timeout (${limit}s)"
    else
        FAILED=$(sed -n '/The following tests FAILED:/,$ s/^[[:space:]]*[0-9]* - \([^ ]*\) (\(.*\))$/\1 (\2)/p' "$log" |
            tr '\n' ' ')
        FAILED=${FAILED% }
        [ -n "$FAILED" ] || FAILED="ctest exit $rc"
    fi
}

echo "mutate: the unmutated suite (log: tests-base.log)"
tb=$(date +%s)
run_tests all "$LOGS/tests-base.log" $((TLIMIT > 3600 ? TLIMIT : 3600))
[ -z "$FAILED" ] || { tail -30 "$LOGS/tests-base.log" >&2; die "the unmutated suite fails: $FAILED"; }
tb=$(($(date +%s) - tb))
[ $((2 * tb)) -le "$TLIMIT" ] ||
    echo "mutate: warning: the unmutated suite took ${tb}s, the limit of a test run is ${TLIMIT}s (-t)" >&2

# ---------------------------------------------------------------- mutations

res=() by=() secs=()
for i in "${sel[@]}"; do
    id=${ids[i]} f=$TREE/${files[i]}
    t1=$(date +%s)
    cp "$f" "$SCRATCH/orig"
    MUTATED=$f
    apply_in "$f" "${finds[i]}" "${repls[i]}" || die "$id: applying failed"
    subset=${tests[i]}
    [ $ALL_TESTS = 1 ] && subset=all
    if ! run_bg "$LOGS/$id.build.log" cmake --build "$BUILD" -j "$JOBS"; then
        res[i]=KILLED by[i]="build: $(grep -m1 'error' "$LOGS/$id.build.log" | sed "s|$TREE/||" | cut -c1-100)"
    else
        run_tests "$subset" "$LOGS/$id.tests.log"
        if [ -n "$FAILED" ]; then res[i]=KILLED by[i]=$FAILED
        elif [ -n "${equivs[i]}" ]; then res[i]=SURVIVED by[i]="equivalent: ${equivs[i]}"
        else res[i]=SURVIVED by[i]="tests: $subset"; fi
    fi
    cat "$SCRATCH/orig" > "$f" # a new mtime: the next build recompiles it
    MUTATED=
    secs[i]=$(($(date +%s) - t1))
    printf 'mutate: %-28s %-8s %s (%ss)\n' "$id" "${res[i]}" "${by[i]}" "${secs[i]}"
done

# ---------------------------------------------------------------- table

table()
{
    printf '%-28s %-26s %-8s %5s  %s\n' id file result sec "killed by / note"
    local i killed=0 survived=0 equiv=0
    for i in "${sel[@]}"; do
        printf '%-28s %-26s %-8s %5s  %s\n' "${ids[i]}" "${files[i]}" "${res[i]}" "${secs[i]}" "${by[i]}"
        if [ "${res[i]}" = KILLED ]; then
            killed=$((killed + 1))
            [ -n "${equivs[i]}" ] && echo "    (marked equivalent but killed: the mark is wrong)"
        elif [ -n "${equivs[i]}" ]; then equiv=$((equiv + 1))
        else
            survived=$((survived + 1))
            echo "    ${notes[i]}"
        fi
    done
    echo "killed $killed, survived $survived, equivalent $equiv, of ${#sel[@]}; $(($(date +%s) - T0)) s ($what)"
}
echo
table
[ -n "$REPORT" ] && table > "$REPORT"
for i in "${sel[@]}"; do
    [ "${res[i]}" = SURVIVED ] && [ -z "${equivs[i]}" ] && exit 1
done
exit 0
