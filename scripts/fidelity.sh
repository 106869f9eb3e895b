#!/bin/bash
# Simulator fidelity: the same requests at the same arrival times through
# the served engine (`fairkv serve --model` + `fairkv load`) and through the
# simulator (`fairkv bench --profile cpu-tiny`), per policy; prints mean and
# P99 end-to-end latency of both and their difference.
#
#   scripts/fidelity.sh [RATE] [DURATION_S] [OUT_DIR]      (defaults 8 40 fidelity-out)
#
# Each run, in this order (nothing is tuned after step 2):
#   1. calibration: a different workload (seed 2) served with the same
#      server flags (policy flru) and `--step-log`, i.e. the engine's steps
#      as they run while serving;
#   2. fit: `fairkv bench --calibrate-log` (form chosen by held-out error on
#      the calibration steps alone) writes the coefficients;
#   3. evaluation: the workload of seed 1, served once per policy;
#   4. the simulator on the evaluation workload with those coefficients
#      (`--profile cpu-tiny --step-coeffs ...`), then the comparison.
#
# Environment: FAIRKV (default build/fairkv), PORT (18200), KV_TOKENS (2048:
# the KV capacity of both, in tokens; the tiny model's K+V is 2 KiB a token),
# RUNS (1: the whole sequence this many times, in OUT_DIR/run1, run2, ...,
# then the median and range over runs), SERVE_EXTRA (more `fairkv serve`
# flags for every served run, calibration included; e.g. "--backend-opt
# prefix_cache=off").  The trace `fairkv load --write-trace` writes carries
# each request's shared_tokens (the per-client prompt prefix its prompts
# share), so the simulator's prefix cache shares the same full pages as the
# served engine's; the last table compares the prefix hits and recomputed
# tokens of both.
set -eu
RATE=${1:-8}
DUR=${2:-40}
OUT=${3:-fidelity-out}
FAIRKV=${FAIRKV:-build/fairkv}
PORT=${PORT:-18200}
KV_TOKENS=${KV_TOKENS:-2048}
RUNS=${RUNS:-1}
SERVE_EXTRA=${SERVE_EXTRA:-}
mkdir -p "$OUT"
[ -f "$OUT/tiny.gguf" ] || "$FAIRKV" model init --preset tiny --out "$OUT/tiny.gguf"
# the seed's class mix with totals cut to the tiny model's 1024-token context
"$FAIRKV" load --workload seed --rate "$RATE" --duration "$DUR" --max-total 1024 --seed 2 --clients 8 \
    --write-trace "$OUT/calib-workload.csv"
"$FAIRKV" load --workload seed --rate "$RATE" --duration "$DUR" --max-total 1024 --seed 1 --clients 8 \
    --write-trace "$OUT/workload.csv"

# serve NAME WORKLOAD DIR FLAGS...: one served run with a step log
serve() {
    local name=$1 wl=$2 dir=$3
    shift 3
    # shellcheck disable=SC2086
    "$FAIRKV" serve --model "$OUT/tiny.gguf" --port "$PORT" --kv-budget $((KV_TOKENS * 2048)) --chunk-tokens 64 \
        --threads 1 --max-batch-tokens 256 --max-running 16 --backend-opt ignore_eos=1 --max-connections-per-ip 0 \
        $SERVE_EXTRA "$@" \
        --step-log "$dir/steps-$name.log" > "$dir/serve-$name.log" 2>&1 &
    local spid=$!
    for _ in $(seq 50); do curl -sf "http://127.0.0.1:$PORT/health" > /dev/null && break; sleep 0.1; done
    echo "$name start $(date -u +%FT%TZ) $(uptime)" >> "$dir/uptime.txt"
    "$FAIRKV" load --url "http://127.0.0.1:$PORT" --workload "$wl" --clients 8 --format json > "$dir/load-$name.json"
    echo "$name end   $(date -u +%FT%TZ) $(uptime)" >> "$dir/uptime.txt"
    curl -s "http://127.0.0.1:$PORT/metrics" > "$dir/metrics-$name.txt"
    kill -TERM "$spid"
    wait "$spid" || true
}

# scheme name of the simulator, then the engine's flags for the same cache configuration
POLICIES=("lru|--policy lru --quotas off --dynamic-chunking off"
          "flru|--policy flru --quotas on --dynamic-chunking off"
          "flru-dyn|--policy flru --quotas on --dynamic-chunking on")
for run in $(seq "$RUNS"); do
    dir=$OUT
    [ "$RUNS" -gt 1 ] && dir=$OUT/run$run
    mkdir -p "$dir"
    : > "$dir/uptime.txt"
    serve calib "$OUT/calib-workload.csv" "$dir" --policy flru --quotas on --dynamic-chunking off
    "$FAIRKV" bench --calibrate-log "$dir/steps-calib.log" --out "$dir/calib.txt" --coeffs-out "$dir/coeffs.txt" \
        > /dev/null
    for p in "${POLICIES[@]}"; do
        # shellcheck disable=SC2086
        serve "${p%%|*}" "$OUT/workload.csv" "$dir" ${p#*|}
    done
    "$FAIRKV" bench --trace "$OUT/workload.csv" --native --profile cpu-tiny --step-coeffs "$(cat "$dir/coeffs.txt")" \
        --schemes lru,flru,flru-dyn --max-batch-tokens 256 --max-running 16 --capacity-tokens "$KV_TOKENS" \
        --clients 8 --format json > "$dir/sim.json"
done

python3 - "$OUT" "$RUNS" <<'EOF'
import json, statistics, sys
out, runs = sys.argv[1], int(sys.argv[2])
dirs = [out] if runs == 1 else [f"{out}/run{i}" for i in range(1, runs + 1)]
def steps(path):
    """the step log's records: (tokens, requests, attn, wall ms)"""
    rows = []
    for line in open(path):
        if line.startswith("#") or not line.strip():
            continue
        t, tok, req, attn, wall = line.split()
        rows.append((int(tok), int(req), float(attn), int(wall) / 1e6))
    return rows
policies = ["lru", "flru", "flru-dyn"]
diffs = {p: [] for p in policies}
print("| run | fitted c0, c1, c2[, c3] | policy | served mean | sim mean | diff | served P99 | sim P99 | diff | "
      "served ok/sent | steps measured / fitted | engine busy |")
print("|---|---|---|---|---|---|---|---|---|---|---|---|")
for k, d in enumerate(dirs, 1):
    c = [float(x) for x in open(f"{d}/coeffs.txt").read().strip().split(",")] + [0.0]
    sim = {s["name"]: s for s in json.load(open(f"{d}/sim.json"))["schemes"]}
    for p in policies:
        ld = json.load(open(f"{d}/load-{p}.json"))
        a = ld["classes"]["all"]
        st = steps(f"{d}/steps-{p}.log")
        meas = sum(r[3] for r in st) / 1e3
        fit = sum(c[0] + c[1] * r[0] + c[2] * r[2] + c[3] * r[1] for r in st) / 1e3
        s = sim[p]["e2e"]
        rm, rp = a["e2e_ms"]["mean"], a["e2e_ms"]["p99"]
        dm, dp = (s["mean_ms"] - rm) / rm, (s["p99_ms"] - rp) / rp
        diffs[p].append((dm, dp, rm, rp, s["mean_ms"], s["p99_ms"]))
        cs = ", ".join(f"{x:.4g}" for x in c[:-1])
        print(f"| {k} | {cs} | {p} | {rm:.0f} | {s['mean_ms']:.0f} | {100 * dm:+.0f}% | {rp:.0f} | {s['p99_ms']:.0f} | "
              f"{100 * dp:+.0f}% | {a['ok']}/{a['sent']} | {meas:.1f} / {fit:.1f} s ({meas / fit:.2f}) | "
              f"{100 * meas / ld['wall_s']:.0f}% |")
def counter(path, name):
    """sum of a Prometheus counter's samples in a /metrics dump"""
    v = 0.0
    for line in open(path):
        if line.startswith(name + " ") or line.startswith(name + "{"):
            v += float(line.split()[-1])
    return v
prompt_all = 0
for line in open(f"{out}/workload.csv"):
    f = line.strip().split(",")
    if f and f[0] and f[0][0].isdigit():
        prompt_all += int(f[1])
print()
print(f"| run | policy | served prefix hits (counter) | sim prefix hits (first admission) | "
      f"served recomputed | sim recomputed |  (prompt tokens: {prompt_all})")
print("|---|---|---|---|---|---|")
for k, d in enumerate(dirs, 1):
    sim = {s["name"]: s for s in json.load(open(f"{d}/sim.json"))["schemes"]}
    for p in policies:
        m = f"{d}/metrics-{p}.txt"
        print(f"| {k} | {p} | {counter(m, 'fairkv_prefix_hits_tokens_total'):.0f} | "
              f"{sim[p]['prefix_hit_rate'] * prompt_all:.0f} | {counter(m, 'fairkv_recomputed_tokens_total'):.0f} | "
              f"{sim[p]['recomputed_tokens']} |")
if runs > 1:
    print()
    print("| policy | runs | diff mean: median (range) | diff P99: median (range) | within 15% (both) |")
    print("|---|---|---|---|---|")
    for p in policies:
        m = [x[0] for x in diffs[p]]
        q = [x[1] for x in diffs[p]]
        ok = sum(1 for a, b in zip(m, q) if abs(a) <= 0.15 and abs(b) <= 0.15)
        print(f"| {p} | {len(m)} | {100 * statistics.median(m):+.0f}% ({100 * min(m):+.0f}..{100 * max(m):+.0f}%) | "
              f"{100 * statistics.median(q):+.0f}% ({100 * min(q):+.0f}..{100 * max(q):+.0f}%) | {ok} of {len(m)} |")
EOF
