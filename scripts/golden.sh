#!/bin/bash
# Behaviour fingerprints of the simulator: one md5 per configuration, over
# fairkv run's stdout and over fairkv bench outputs that cover every
# scheduler path (plain order, DRR, VTC with memory, dynamic batching,
# reclaim, quantization ladder, host and remote tiers, MIN bound,
# frontier, traces) and bench --help.  A restructuring keeps every line
# (docs/EVALUATION.md, section 6).  Wall-time lines are left out.
#
#   scripts/golden.sh BINARY [DATA_DIR]      (default ../shared/data)
F=${1:?usage: scripts/golden.sh BINARY [DATA_DIR]}
D=${2:-$(dirname "$0")/../../shared/data}
run() { local name=$1; shift; printf '%-28s %s\n' "$name" "$("$F" "$@" 2>&1 | grep -v "simulated in" | md5sum | cut -c1-32)"; }
printf "%-28s %s\n" run "$("$F" run 2>/dev/null | md5sum | cut -c1-32)"
run seed bench --quiet --format json --requests 600
run seed-csv bench --quiet --format csv --requests 600
run seed-text bench --requests 600
run tenants bench --quiet --format json --workload tenants --tenants 6 --load 0.9 --requests 600
run tenants-drr bench --quiet --format json --workload tenants --tenants 6 --load 0.9 --requests 600 --step-share drr
run tenants-vtc bench --quiet --format json --workload tenants --tenants 6 --load 0.9 --requests 600 --schemes vtc,fairkv,lru --admission vtc --vtc-mem 0.1
run alike bench --quiet --format json --workload tenants-alike --tenants 6 --load 0.9 --requests 600
run chat bench --quiet --format json --workload chat --tenants 4 --load 0.9 --requests 600
run chat-host bench --quiet --format json --workload chat --tenants 4 --load 0.9 --requests 600 --host-x 4 --host-demote --min-bound
run chat-remote bench --quiet --format json --workload chat --tenants 4 --load 0.9 --requests 600 --host-x 1 --host-demote --remote-gb 100 --tier-admission tinylfu
run quant bench --quiet --format json --requests 600 --quant under-pressure --quant-warm 256 --price-kv-bytes --reclaim quantize8,quantize4,offload,evict --host-gb 10
run dyn bench --quiet --format json --requests 600 --batching dynamic --no-chunked-prefill --victim fair --quotas tenant --tenants 4
run frontier bench --quiet --format json --requests 300 --frontier --schemes lru,fairkv
run mooncake bench --quiet --format json --trace $D/mooncake_synthetic.jsonl --requests 800 --tenants 4 --tenant-assign session --host-x 4 --host-demote
run azure bench --quiet --format json --trace $D/azure_llm_conv_2023.csv --requests 800 --tenants 4 --tenant-assign heavy:0.7 --load 0.9
run help bench --help
