#!/bin/bash
# Simulator fidelity: the same requests at the same arrival times through
# the served engine (`fairkv serve --model` + `fairkv load`) and through the
# simulator (`fairkv bench --profile cpu-tiny`), per policy; prints mean and
# P99 end-to-end latency of both and their difference.
#
#   scripts/fidelity.sh [RATE] [DURATION_S] [OUT_DIR]      (defaults 8 40 fidelity-out)
#
# Environment: FAIRKV (default build/fairkv), PORT (18200), KV_TOKENS (2048:
# the KV capacity of both, in tokens; the tiny model's K+V is 2 KiB a token).
set -eu
RATE=${1:-8}
DUR=${2:-40}
OUT=${3:-fidelity-out}
FAIRKV=${FAIRKV:-build/fairkv}
PORT=${PORT:-18200}
KV_TOKENS=${KV_TOKENS:-2048}
mkdir -p "$OUT"
[ -f "$OUT/tiny.gguf" ] || "$FAIRKV" model init --preset tiny --out "$OUT/tiny.gguf"
# the seed's class mix with totals cut to the tiny model's 1024-token context
"$FAIRKV" load --workload seed --rate "$RATE" --duration "$DUR" --max-total 1024 --seed 1 --clients 8 \
    --write-trace "$OUT/workload.csv"

# scheme name of the simulator, then the engine's flags for the same cache configuration
POLICIES=("lru|--policy lru --quotas off --dynamic-chunking off"
          "flru|--policy flru --quotas on --dynamic-chunking off"
          "flru-dyn|--policy flru --quotas on --dynamic-chunking on")
for p in "${POLICIES[@]}"; do
    name=${p%%|*}
    flags=${p#*|}
    # shellcheck disable=SC2086
    "$FAIRKV" serve --model "$OUT/tiny.gguf" --port "$PORT" --kv-budget $((KV_TOKENS * 2048)) --chunk-tokens 64 \
        --threads 1 --max-batch-tokens 256 --max-running 16 --backend-opt ignore_eos=1 $flags \
        > "$OUT/serve-$name.log" 2>&1 &
    spid=$!
    for _ in $(seq 50); do curl -sf "http://127.0.0.1:$PORT/health" > /dev/null && break; sleep 0.1; done
    echo "$name start $(date -u +%FT%TZ) $(uptime)" >> "$OUT/uptime.txt"
    "$FAIRKV" load --url "http://127.0.0.1:$PORT" --workload "$OUT/workload.csv" --clients 8 --format json \
        > "$OUT/load-$name.json"
    echo "$name end   $(date -u +%FT%TZ) $(uptime)" >> "$OUT/uptime.txt"
    curl -s "http://127.0.0.1:$PORT/metrics" > "$OUT/metrics-$name.txt"
    kill -TERM "$spid"
    wait "$spid" || true
done

"$FAIRKV" bench --trace "$OUT/workload.csv" --native --profile cpu-tiny --schemes lru,flru,flru-dyn \
    --max-batch-tokens 256 --max-running 16 --capacity-tokens "$KV_TOKENS" --clients 8 --format json \
    > "$OUT/sim.json"

python3 - "$OUT" <<'EOF'
import json, re, sys
out = sys.argv[1]
sim = {s["name"]: s for s in json.load(open(f"{out}/sim.json"))["schemes"]}
# the cpu-tiny coefficients (src/sim/profile.c), to price the served run's own steps
C0, C1, C2 = 0.385413, 0.299448, 5.82354e-05
def metric(text, name):
    m = re.search(r"^" + re.escape(name) + r" ([0-9.e+]+)$", text, re.M)
    return float(m.group(1)) if m else float("nan")
print("| policy | served mean | sim mean | diff | served P99 | sim P99 | diff | served ok/sent | "
      "step time measured / fitted | engine busy |")
print("|---|---|---|---|---|---|---|---|---|---|")
for name in ["lru", "flru", "flru-dyn"]:
    ld = json.load(open(f"{out}/load-{name}.json"))
    a = ld["classes"]["all"]
    m = open(f"{out}/metrics-{name}.txt").read()
    steps = metric(m, "fairkv_engine_timed_steps_total")
    secs = metric(m, "fairkv_engine_step_seconds_total")
    toks = metric(m, "fairkv_engine_batch_tokens_total")
    attn = metric(m, "fairkv_engine_attention_work_total")
    fitted = (C0 * steps + C1 * toks + C2 * attn) / 1e3
    s = sim[name]["e2e"]
    rm, rp = a["e2e_ms"]["mean"], a["e2e_ms"]["p99"]
    print(f"| {name} | {rm:.0f} | {s['mean_ms']:.0f} | {100 * (s['mean_ms'] - rm) / rm:+.0f}% | {rp:.0f} | "
          f"{s['p99_ms']:.0f} | {100 * (s['p99_ms'] - rp) / rp:+.0f}% | {a['ok']}/{a['sent']} | "
          f"{secs:.1f} s / {fitted:.1f} s | {100 * secs / ld['wall_s']:.0f}% |")
EOF
