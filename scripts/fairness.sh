#!/bin/bash
# The Fairness section of docs/EVALUATION.md, reproduced: the tables on the
# fairness workloads and the traces, what each fairness mechanism adds, and
# the memory frontier.  Prints Markdown on stdout.
#
#   scripts/fairness.sh [BUILD_DIR]      (default build; needs python3)
#
# Every run: profile a100-llama2-7b, seed 42, the capacity rule (0.75 x peak
# live demand), load 0.9 (the load of the tenants target).  Tenants of the
# traces and of the seed workload, fixed before any run: the seed workload
# and the Azure trace have no user or session signal, so 4 tenants with
# tenant 1 sending 70% of the requests (heavy:0.7, the development setting
# of the fairkv scheme); Mooncake's sessions hashed to 4 tenants (session).
# Not part of CI (about 3 minutes on two cores).
set -euo pipefail
B=${1:-build}
F="$B/fairkv"
D=../shared/data
[ -x "$F" ] || { echo "fairness.sh: $F not built" >&2; exit 1; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
ALL=lru,vtc,belady,vllm,vllm-fp8,lru+sglang-victim,fairkv,oracle-memory,isolated

table() { # name, then bench options
    local name=$1
    shift
    "$F" bench --quiet --format json --load 0.9 "$@" >"$tmp/$name.json"
    python3 - "$tmp/$name.json" "$name" "$*" <<'EOF'
import json, sys
j = json.load(open(sys.argv[1]))
print(f"\n**{sys.argv[2]}** (`fairkv bench --load 0.9 {sys.argv[3]}`): {j['requests']} requests, "
      f"{j['capacity_tokens']} tokens of KV ({j['capacity_rule']}), {j.get('tenants', '')}\n")
print("| scheme | e2e mean | e2e P99 | worst light TTFT P99 | x iso | worst heavy TTFT P99 | Jain | max/min | service diff | hit% | thr vs lru | preempt |")
print("|---|---|---|---|---|---|---|---|---|---|---|---|")
for s in j["schemes"]:
    f = s.get("fairness", {})
    lt = [t for t in f.get("tenants", []) if t["light"] and t["done"]]
    ht = [t for t in f.get("tenants", []) if not t["light"] and t["done"]]
    lw = max(lt, key=lambda t: t["ttft"]["p99_ms"]) if lt else None
    ratio = max((t["ttft"]["p99_ms"] / t["isolated_ttft_p99_ms"] for t in lt if t.get("isolated_ttft_p99_ms")), default=None)
    hw = max((t["ttft"]["p99_ms"] for t in ht), default=None)
    cell = lambda v, fmt: "-" if v is None else format(v, fmt)
    print(f"| {s['name']} | {s['e2e']['mean_ms']:.0f} | {s['e2e']['p99_ms']:.0f} | "
          f"{cell(lw['ttft']['p99_ms'] if lw else None, '.0f')} | {cell(ratio, '.2f')} | {cell(hw, '.0f')} | "
          f"{f.get('jain_slowdown', 0):.4f} | {f.get('max_min_slowdown', 0):.3f} | {f.get('service_diff_tokens', 0):.0f} | "
          f"{100 * s['prefix_hit_rate']:.2f} | {s['throughput_rel_lru']:.3f} | {s['preemptions']} |")
EOF
}

hits() { # per-tenant prefix hit rates against the partition, and Belady
    python3 - "$tmp/$1.json" <<'EOF'
import json, sys
j = json.load(open(sys.argv[1]))
s = {x["name"]: x for x in j["schemes"]}
b = s["belady"]["prefix_hit_rate"]
print("\n| scheme | hit% | / belady | tenants' hit% (partition's) | tenants below their partition |")
print("|---|---|---|---|---|")
for n, x in s.items():
    if n == "isolated":
        continue
    ts = x["fairness"]["tenants"]
    cells = ", ".join(f"{100*t['prefix_hit_rate']:.1f} ({100*t['partition_hit_rate']:.1f})" for t in ts)
    below = sum(t["prefix_hit_rate"] < t["partition_hit_rate"] for t in ts)
    print(f"| {n} | {100*x['prefix_hit_rate']:.2f} | {x['prefix_hit_rate']/b if b else 0:.3f} | {cells} | {below} |")
EOF
}

echo "### Tables (commit $(git rev-parse --short HEAD 2>/dev/null || echo '?'))"
table tenants --workload tenants --schemes "$ALL"
table tenants-alike --workload tenants-alike --schemes "$ALL"
table chat --workload chat --schemes "$ALL"
hits chat
table seed --tenants 4 --tenant-assign heavy:0.7 --schemes "$ALL"
if [ -r "$D/azure_llm_conv_2023.csv" ]; then
    table azure-conv --trace "$D/azure_llm_conv_2023.csv" --tenants 4 --tenant-assign heavy:0.7 --schemes "$ALL"
else
    echo "(Azure trace absent: skipped)"
fi
if [ -r "$D/mooncake_synthetic.jsonl" ]; then
    table mooncake --trace "$D/mooncake_synthetic.jsonl" --tenants 4 --tenant-assign session --schemes "$ALL"
    hits mooncake
else
    echo "(Mooncake trace absent: skipped)"
fi

# What each mechanism adds: all of them on, then each one off.  The values
# of the two that fairkv leaves off were fixed by rules before this ran:
# the step share is each tenant's equal share of a step (1/n), the memory
# weight 0.001, the value section 3 already used.
mech() { # workload, tenant count
    local w=$1 n=$2
    local share
    share=$(python3 -c "print(1/$n)")
    # the earlier fairkv's mechanisms: no DRR share, no within-share first,
    # no step-time bound, shares as targets
    local old="--no-admit-reclaim --step-bound 0 --shares target --step-share off"
    # shellcheck disable=SC2206
    local on=(--admission vtc --vtc-mem 0.001 --tenant-step-share "$share" --quant under-pressure $old)
    echo
    echo "**mechanisms on $w** (fairkv with every mechanism: \`--schemes fairkv ${on[*]}\`; each row turns one off)"
    echo
    echo "| variant | e2e mean | worst light TTFT P99 | x iso | Jain | max/min | service diff | hit% | thr vs lru | preempt | evicted pages |"
    echo "|---|---|---|---|---|---|---|---|---|---|---|"
    local name args
    while IFS='|' read -r name args; do
        # shellcheck disable=SC2086
        "$F" bench --quiet --format json --load 0.9 --workload "$w" --schemes lru,fairkv,isolated $args \
            >"$tmp/m.json"
        python3 - "$tmp/m.json" "$name" <<'EOF'
import json, sys
j = json.load(open(sys.argv[1]))
s = {x["name"]: x for x in j["schemes"]}
x = s["fairkv"]
f = x["fairness"]
lt = [t for t in f["tenants"] if t["light"] and t["done"]]
lw = max(t["ttft"]["p99_ms"] for t in lt)
ratio = max(t["ttft"]["p99_ms"] / t["isolated_ttft_p99_ms"] for t in lt)
print(f"| {sys.argv[2]} | {x['e2e']['mean_ms']:.0f} | {lw:.0f} | {ratio:.2f} | {f['jain_slowdown']:.4f} | "
      f"{f['max_min_slowdown']:.3f} | {f['service_diff_tokens']:.0f} | {100*x['prefix_hit_rate']:.2f} | "
      f"{x['throughput_rel_lru']:.3f} | {x['preemptions']} | {x['evicted_pages']} |")
EOF
    done <<EOF
all on|${on[*]}
tenant shares off (quotas request)|${on[*]} --quotas request
reclaim off (preempt at once)|${on[*]} --reclaim none
memory term of VTC off|--admission vtc --tenant-step-share $share --quant under-pressure $old
VTC off (fcfs, its memory term with it)|--tenant-step-share $share --quant under-pressure $old
step share off|--admission vtc --vtc-mem 0.001 --quant under-pressure $old --tenant-step-share 1
quantization off (no cold-chunk int8, reclaim evict only)|--admission vtc --vtc-mem 0.001 --tenant-step-share $share --reclaim evict --quant off $old
fairkv before the re-choices (shares and reclaim only)|$old --tenant-step-share 1 --quant off
fairkv of the first re-choice (DRR step share, within-share first)|--step-share drr --step-bound 0 --shares target --admit-reclaim --tenant-step-share 1 --quant off
fairkv of the second re-choice (DRR step share, step-time bound, guarantees)|--step-share drr --step-bound 2 --shares guarantee --no-admit-reclaim --tenant-step-share 1 --quant off
fairkv as recommended (1/n step fraction, int8 cold chunks under pressure, guarantees, reclaim)|
recommended, step fraction off|--tenant-step-share 1
recommended, cold-chunk quantization off|--quant off
recommended, DRR step share instead of the fraction|--step-share drr
recommended, step-time bound on|--step-bound 2
recommended, shares as targets|--shares target
recommended, within-share first on|--admit-reclaim
recommended, tenant shares off|--quotas request
recommended, reclaim off|--reclaim none
EOF
}
echo
echo "### What each mechanism adds"
mech tenants 6
mech chat 4

echo
echo "### Memory frontier"
for w in seed tenants chat; do
    # chat reuses finished turns' history, which the peak live demand does
    # not count: its search goes up to 8x
    top=1
    [ "$w" = chat ] && top=8
    echo
    echo "**$w** (\`fairkv bench --frontier --frontier-max $top --workload $w --schemes lru,vllm,vllm-fp8,fairkv\`, load 0.8), then fairkv with its cold-chunk quantization under pressure and always (\`--quant under-pressure\`, \`--quant always\`; the scheme's precision: int4 behind 64 hot tokens in fp16):"
    echo
    "$F" bench --quiet --frontier --frontier-max $top --workload "$w" --schemes lru,vllm,vllm-fp8,fairkv --format json >"$tmp/f.json"
    "$F" bench --quiet --frontier --frontier-max $top --workload "$w" --schemes fairkv --quant under-pressure --format json >"$tmp/fq.json"
    "$F" bench --quiet --frontier --frontier-max $top --workload "$w" --schemes fairkv --quant always --format json >"$tmp/fa.json"
    python3 - "$tmp/f.json" "$tmp/fq.json" "$tmp/fa.json" <<'EOF'
import json, sys
a = json.load(open(sys.argv[1]))
q = json.load(open(sys.argv[2]))
al = json.load(open(sys.argv[3]))
print(f"peak live demand {a['peak_tokens']} tokens; oracle mean {a['oracle']['mean_ms']:.1f} ms, P99 {a['oracle']['p99_ms']:.1f}, short P99 {a['oracle']['short_p99_ms']:.1f}\n")
print("| scheme | capacity / peak | tokens | GB | mean / oracle | P99 / oracle | short P99 / oracle |")
print("|---|---|---|---|---|---|---|")
rows = a["frontier"] + [dict(x, scheme=x["scheme"] + " + quant under-pressure") for x in q["frontier"]] + \
    [dict(x, scheme=x["scheme"] + " + quant always") for x in al["frontier"]]
for x in rows:
    if x["capacity_frac"] is None:
        print(f"| {x['scheme']} | > top | | | | | |")
        continue
    print(f"| {x['scheme']} | {x['capacity_frac']:.3f} | {x['capacity_tokens']} | {x['capacity_gb']:.2f} | "
          f"{x['mean_ratio']:.3f} | {x['p99_ratio']:.3f} | {x['short_p99_ratio']:.3f} |")
EOF
done
