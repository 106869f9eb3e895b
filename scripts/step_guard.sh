#!/bin/bash
# The table of docs/EVALUATION.md, "Within-share tenants first and the
# step-time bound": the fairkv scheme on a workload at load 0.9 with
# --admit-reclaim and --step-bound 2 off and on, each alone and together,
# without and with --step-share drr; lru (the same options off) is the
# throughput reference, the isolated scheme the TTFT reference.  Prints Markdown on stdout.
#
#   scripts/step_guard.sh [BUILD_DIR] [WORKLOAD]   (default build tenants; needs python3)
#
# k = 2 was fixed before any run (docs/EVALUATION.md states the rule).
set -euo pipefail
B=${1:-build}
W=${2:-tenants}
F="$B/fairkv"
[ -x "$F" ] || { echo "step_guard.sh: $F not built" >&2; exit 1; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
"$F" bench --quiet --format json --load 0.9 --workload "$W" --schemes lru,isolated >"$tmp/base.json"
i=0
while read -r opts; do
    # shellcheck disable=SC2086
    "$F" bench --quiet --format json --load 0.9 --workload "$W" --schemes fairkv $opts >"$tmp/$i.json"
    echo "$i $opts" >>"$tmp/list"
    i=$((i + 1))
done <<'EOF'
--step-share off
--admit-reclaim
--step-bound 2
--admit-reclaim --step-bound 2
--step-share drr
--step-share drr --admit-reclaim
--step-share drr --step-bound 2
--step-share drr --admit-reclaim --step-bound 2
EOF
python3 - "$tmp" "$W" <<'EOF'
import json, sys, os
d, w = sys.argv[1], sys.argv[2]
base = json.load(open(os.path.join(d, "base.json")))
lru = next(s for s in base["schemes"] if s["name"] == "lru")
iso = {t["id"]: t["isolated_ttft_p99_ms"] for t in lru["fairness"]["tenants"]}
def row(name, s):
    ten = s["fairness"]["tenants"]
    light = [t for t in ten if t["light"]]
    heavy = [t for t in ten if not t["light"]]
    x = [t["ttft"]["p99_ms"] / iso[t["id"]] for t in light]
    hx = [t["ttft"]["p99_ms"] / iso[t["id"]] for t in heavy]
    thr = s["throughput_tok_s"] / lru["throughput_tok_s"]
    print("| %s | %.1f | %.1f | %s | %.3f | %.3f | %.0f | %d |" % (
        name, max(x), sum(x) / len(x), "%.1f" % max(hx) if hx else "-", s["fairness"]["jain_slowdown"], thr,
        s["e2e"]["mean_ms"], s["preemptions"]))
print("**%s**, load 0.9\n" % w)
print("| configuration | worst light TTFT P99 x iso | mean light x iso | worst heavy x iso | Jain | thr vs lru | e2e mean ms | preemptions |")
print("|---|---|---|---|---|---|---|---|")
row("lru", lru)
for line in open(os.path.join(d, "list")):
    i, _, opts = line.strip().partition(" ")
    j = json.load(open(os.path.join(d, i + ".json")))
    row("fairkv " + opts, j["schemes"][0])
EOF
