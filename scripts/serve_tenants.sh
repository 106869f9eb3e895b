#!/bin/sh
# Heavy and light users on the real server, for docs/EVALUATION.md: a
# Llama-shaped model with random weights (`fairkv model init`), `fairkv
# serve` with a setting, and `fairkv load --workload tenants` (two heavy
# users sending long prompts back to back, four light users sending short
# prompts as Poisson arrivals).  Each round runs, in turn: the light users
# alone (their isolated baseline, `--only light`), then the full load once
# per serve setting; the light users' worst P99 TTFT against their isolated
# P99 is printed per setting and round, then the medians over rounds.
#
#   SETTINGS='opts;opts' scripts/serve_tenants.sh [BUILD_DIR] [ROUNDS] [DURATION_S] [PRESET]
#
# Defaults: build, 3 rounds, 30 s, the tiny preset (--ctx 4096), and two
# settings: "" (serve's defaults) and "--step-share drr".  Heavy prompts are
# 2,000 tokens, light ones 40, as `fairkv load`'s defaults.  Each measured
# load follows WARM seconds (default 5) of the same load with other prompts
# against the same server, not counted.  Not part of CI.
set -eu
B=${1:-build}/fairkv
R=${2:-3}
T=${3:-30}
PRESET=${4:-tiny}
SETTINGS=${SETTINGS-";--step-share drr"}
W=$(mktemp -d)
SP=
trap 'if [ -n "$SP" ]; then kill $SP 2>/dev/null; fi; rm -rf "$W"' EXIT
M=$W/model.gguf
"$B" model init --preset "$PRESET" --out "$M" >/dev/null
med() { sort -g | awk '{a[NR] = $1} END {print a[int((NR + 1) / 2)]}'; }

# one serve + load run: $1 setting, $2 extra load options; the JSON report in $W/out.json
run() {
    # shellcheck disable=SC2086
    "$B" serve --port 0 --model "$M" --ctx 4096 --threads 2 $1 > "$W/serve.log" 2>&1 &
    SP=$!
    for _ in $(seq 200); do grep -q 'http://127.0.0.1:' "$W/serve.log" && break; sleep 0.1; done
    URL=$(grep -o 'http://127.0.0.1:[0-9]*' "$W/serve.log" | head -1)
    # warm-up: a fresh server's first requests fault in its buffers and
    # pages (tens of ms); 5 s of the same load with other prompts (another
    # seed, so no prefix of the measured prompts is cached) and not counted
    # shellcheck disable=SC2086
    "$B" load --url "$URL" --workload tenants --duration "${WARM:-5}" --seed 7 --format json $2 > /dev/null
    # shellcheck disable=SC2086
    "$B" load --url "$URL" --workload tenants --duration "$T" --format json $2 > "$W/out.json"
    kill $SP
    wait $SP 2>/dev/null || true
    SP=
}

# the light users' worst P99 TTFT (ms) of $W/out.json, and their tokens/s
light_p99() {
    python3 -c '
import json, sys
u = [x for x in json.load(open(sys.argv[1]))["users"] if x.get("light")]
print(max(x["ttft"]["p99_ms"] for x in u if x["ttft"]["n"]), round(sum(x["tokens_s"] for x in json.load(open(sys.argv[1]))["users"]), 1))
' "$W/out.json"
}

for r in $(seq "$R"); do
    run "" "--only light"
    iso=$(light_p99 | cut -d' ' -f1)
    echo "round $r: light users alone: P99 TTFT $iso ms"
    k=0
    echo "$SETTINGS" | tr ';' '\n' > "$W/settings"
    while IFS= read -r s; do
        k=$((k + 1))
        run "$s" "" < /dev/null
        out=$(light_p99)
        p99=${out% *} tps=${out#* }
        ratio=$(python3 -c "print(f'{$p99 / $iso:.2f}')")
        echo "round $r: serve ${s:-(defaults)}: light P99 TTFT $p99 ms = ${ratio}x isolated; $tps tokens/s in all"
        echo "$ratio" >> "$W/ratio.$k"
        echo "$tps" >> "$W/tps.$k"
    done < "$W/settings"
done
k=0
while IFS= read -r s; do
    k=$((k + 1))
    echo "median over $R rounds: serve ${s:-(defaults)}: light P99 TTFT $(med < "$W/ratio.$k")x isolated, $(med < "$W/tps.$k") tokens/s"
done < "$W/settings"
