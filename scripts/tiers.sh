#!/bin/bash
# The tiers tables of docs/EVALUATION.md: prefix hits per tier (device,
# host, remote) and first-token latency on the Mooncake synthetic trace and
# the chat workload, with host tiers of 0, 1, 4 and 16 times the device's KV
# bytes (idle evicted chunks demoted to it), without and with a remote tier.
# Prints Markdown on stdout.
#
#   scripts/tiers.sh [BUILD_DIR]      (default build; needs python3)
#
# Fixed before any run: profile a100-llama2-7b, seed 42, the capacity rule
# (0.75 x peak live demand), load 0.9 and the tenants of section 3b (chat's
# own 4; Mooncake's sessions hashed to 4); the remote tier 1,000 GB at the
# simulator's defaults, 12.5 GB/s and 0.5 ms a fetch.  Each setting also
# gets a "MIN bound" row (`--min-bound`, src/sim/min_bound.h): MIN's hits at
# the device's size, then with the host's and the remote's added, so its
# device, device + host and total columns bound every row of the setting
# (its host and remote columns alone bound nothing).  Not part of CI (chat:
# seconds; Mooncake: a few minutes).  SCHEMES=... and WORKLOADS="chat
# mooncake" and HOSTS="0 1 4 16" choose what runs; ADMISSION=seen or
# tinylfu puts the admission filter below the device (--tier-admission;
# default off, the tables as they were).
set -euo pipefail
B=${1:-build}
F="$B/fairkv"
D=../shared/data
[ -x "$F" ] || { echo "tiers.sh: $F not built" >&2; exit 1; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
SCHEMES=${SCHEMES:-lru,fairkv,belady,oracle-memory}
WORKLOADS=${WORKLOADS:-chat mooncake}
HOSTS=${HOSTS:-0 1 4 16}
ADMISSION=${ADMISSION:-off}
REMOTE="--remote-gb 1000"

rows() { # workload label, host x, remote label, then bench options
    local wl=$1 hx=$2 rl=$3
    shift 3
    local host=()
    [ "$hx" != 0 ] && host=(--host-x "$hx" --host-demote)
    # the filter needs a tier below the device
    [ "$ADMISSION" != off ] && { [ "$hx" != 0 ] || [ "$rl" != none ]; } && host+=(--tier-admission "$ADMISSION")
    "$F" bench --quiet --format json --load 0.9 --schemes "$SCHEMES" --min-bound "${host[@]}" "$@" >"$tmp/r.json"
    python3 - "$tmp/r.json" "$wl" "$hx" "$rl" <<'EOF'
import json, sys
j = json.load(open(sys.argv[1]))
for s in j["schemes"]:
    t = s.get("tiers", {"device": s["prefix_hit_rate"], "host": 0.0, "remote": 0.0})
    print(f"| {sys.argv[2]} | {sys.argv[3]}x | {sys.argv[4]} | {s['name']} | {100*t['device']:.2f} | "
          f"{100*t['host']:.2f} | {100*t['remote']:.2f} | {100*s['prefix_hit_rate']:.2f} | "
          f"{s['ttft']['mean_ms']:.1f} | {s['ttft']['p99_ms']:.1f} | {s['e2e']['mean_ms']:.1f} |")
b = j["min_bound"]
print(f"| {sys.argv[2]} | {sys.argv[3]}x | {sys.argv[4]} | MIN bound | {100*b['device']:.2f} | "
      f"{100*(b['device_host']-b['device']):.2f} | {100*(b['all']-b['device_host']):.2f} | {100*b['all']:.2f} | - | - | - |")
EOF
}

echo "| workload | host | remote | scheme | device hit% | host hit% | remote hit% | total hit% | TTFT mean (ms) | TTFT P99 (ms) | e2e mean (ms) |"
echo "|---|---|---|---|---|---|---|---|---|---|---|"
for wl in $WORKLOADS; do
    if [ "$wl" = chat ]; then src=(--workload chat)
    else src=(--trace "$D/mooncake_synthetic.jsonl" --tenants 4 --tenant-assign session); fi
    for hx in $HOSTS; do
        for rl in none 1000GB; do
            r=()
            [ "$rl" != none ] && r=($REMOTE)
            rows "$wl" "$hx" "$rl" "${src[@]}" "${r[@]}"
        done
    done
done
