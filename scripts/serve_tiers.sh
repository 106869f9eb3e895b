#!/bin/sh
# Two `fairkv serve` instances over one Redis, for docs/EVALUATION.md
# (section 3c, "The served path: two instances over one Redis"): the
# shared Mooncake trace replayed by its blocks (`fairkv load
# --trace-blocks`), its rows split round robin between the instances (two
# `fairkv load --shard I/2` at once, half the rate each: a conversation's
# turns land on either instance), once per setting, the same trace and
# sizes each time; then a table per instance and setting scraped from the
# instances' /metrics.
#
#   scripts/serve_tiers.sh [BUILD_DIR] [SECONDS]
#
# SECONDS: arrivals per setting (default 150: with RATE 12, about 1,800
# of the trace's 3,993 rows).  Environment, each with a default: RATE
# (requests per second, both instances together; 12), BLOCK (tokens a
# 512-token trace block stands for; 4: prompts of about 120 tokens, four
# blocks to a 16-token page), MAXP (prompt cut, tokens; 512), KV (device
# KV budget of each instance; 2MiB = 1,638 tokens of stories260K's f32
# K/V), HOST (host tier of each; 8MiB, 4x the device), CLIENTS ('user'
# ids; 4), MODEL (a GGUF; the shared stories260K), TRACE (the shared
# Mooncake trace), SETTINGS (';'-separated serve options, one run each;
# default: admission off with host lru (the behaviour before the host
# orders), off with s3fifo (serve's defaults with a host tier), tinylfu
# with s3fifo (the filter on)), COMMON (serve options of every setting;
# default --step-bound 0, as in the first table of docs/EVALUATION.md; at
# serve's default bound the run stalled until commit 746bbcb, and since
# 0421987 both bounds give the same hits: see there).
#
# Each setting starts from an empty Redis (FLUSHALL) and fresh instances.
# Not part of CI.  Needs redis-server and redis-cli (Debian's redis-server).
set -eu
BUILD=${1:-build}
B=$BUILD/fairkv
T=${2:-150}
RATE=${RATE:-12}
BLOCK=${BLOCK:-4}
MAXP=${MAXP:-512}
KV=${KV:-2MiB}
HOST=${HOST:-8MiB}
CLIENTS=${CLIENTS:-4}
COMMON=${COMMON---step-bound 0}
DATA=${DATA:-$(dirname "$0")/../../shared/data}
MODEL=${MODEL:-$DATA/models/stories260K-llamacpp.gguf}
TRACE=${TRACE:-$DATA/mooncake_synthetic.jsonl}
SETTINGS=${SETTINGS-"--tier-admission off --host-policy lru;--tier-admission off --host-policy s3fifo;--tier-admission tinylfu --host-policy s3fifo"}
for f in "$MODEL" "$TRACE"; do
    [ -r "$f" ] || { echo "serve_tiers: $f is absent (the shared data folder)" >&2; exit 2; }
done
for c in redis-server redis-cli python3; do
    command -v $c >/dev/null || { echo "serve_tiers: $c is not installed" >&2; exit 2; }
done
W=$(mktemp -d)
RP='' S1='' S2='' L0='' L1=''
# stop the instances ($1 = serves), or everything left ($1 = all: the load
# generators and Redis too)
stop() {
    ps=" $S1 $S2"
    [ "${1:-}" = all ] && ps="$L0 $L1 $ps $RP"
    for p in $ps; do kill "$p" 2>/dev/null || true; done
    for p in $ps; do wait "$p" 2>/dev/null || true; done
    S1='' S2=''
}
trap 'stop all; rm -rf "$W"' EXIT
trap 'exit 130' INT TERM
scrape() { python3 -c 'import sys, urllib.request; sys.stdout.write(urllib.request.urlopen(sys.argv[1] + "/metrics", timeout=30).read().decode())' "$1"; }
free_port() { python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }

RPORT=$(free_port)
redis-server --port "$RPORT" --bind 127.0.0.1 --save "" --appendonly no --dir "$W" --protected-mode yes \
    > "$W/redis.log" 2>&1 &
RP=$!
for _ in $(seq 100); do redis-cli -p "$RPORT" ping >/dev/null 2>&1 && break; sleep 0.1; done
redis-cli -p "$RPORT" ping >/dev/null || { echo "serve_tiers: redis-server did not start" >&2; cat "$W/redis.log" >&2; exit 1; }

# one instance: $1 log file, $2 setting; its pid in SP, URL in SURL
start_serve() {
    # shellcheck disable=SC2086
    "$B" serve --port 0 --model "$MODEL" --ctx $((MAXP + 64)) --threads 1 --kv-budget "$KV" --host-kv "$HOST" \
        --remote "redis://127.0.0.1:$RPORT" --remote-timeout-ms 2000 --max-queue 8192 --drain-timeout 1 $COMMON $2 > "$1" 2>&1 &
    SP=$!
    for _ in $(seq 300); do grep -q "http://127.0.0.1:" "$1" 2>/dev/null && break; sleep 0.1; done
    SURL=$(grep -o 'http://127.0.0.1:[0-9]*' "$1" | head -1)
    [ -n "$SURL" ] || { echo "serve_tiers: fairkv serve did not start:" >&2; cat "$1" >&2; exit 1; }
}

HALF=$(python3 -c "print($RATE / 2)")
echo "serve_tiers: $(basename "$TRACE") by its blocks ($BLOCK tokens a block, prompts cut at $MAXP), $RATE requests/s for ${T} s split between two instances; device $KV, host $HOST each, one Redis; every setting with: ${COMMON:-(nothing)}"
k=0
echo "$SETTINGS" | tr ';' '\n' > "$W/settings"
while IFS= read -r s; do
    k=$((k + 1))
    redis-cli -p "$RPORT" flushall >/dev/null
    start_serve "$W/s1.log" "$s"; S1=$SP; U1=$SURL
    start_serve "$W/s2.log" "$s"; S2=$SP; U2=$SURL
    for i in 0 1; do
        u=$U1; [ $i = 1 ] && u=$U2
        "$B" load --url "$u" --workload "$TRACE" --trace-blocks "$BLOCK" --max-prompt "$MAXP" --shard $i/2 \
            --rate "$HALF" --duration "$T" --clients "$CLIENTS" --vocab 512 --seed 1 --timeout 900 --format json \
            > "$W/load$i.$k.json" 2> "$W/load$i.$k.err" &
        eval "L$i=\$!"
    done
    # shellcheck disable=SC2154
    if ! wait "$L0" || ! wait "$L1"; then
        echo "serve_tiers: fairkv load failed:" >&2
        cat "$W"/load*."$k".err >&2
        exit 1
    fi
    L0='' L1=
    sleep 1 # the last write-backs
    scrape "$U1" > "$W/m1.$k"
    scrape "$U2" > "$W/m2.$k"
    echo "$s" > "$W/name.$k"
    stop serves
done < "$W/settings"
echo "Redis: $(redis-cli -p "$RPORT" info memory | grep '^used_memory_human' | tr -d '\r')"

python3 - "$W" "$k" <<'EOF'
import json, re, sys
w, n = sys.argv[1], int(sys.argv[2])
def metric(text, name):
    m = re.search(r'^' + re.escape(name) + r' ([0-9.eE+-]+)$', text, re.M)
    return float(m.group(1)) if m else None
def fmt(v, d=0):
    return '-' if v is None else f'{v:,.{d}f}'
print()
print('| setting | instance | requests ok / sent | prompt tokens | device hit tok | host hit tok | remote hit tok '
      '| total hit % | remote hits (pages) | of them written by the other instance | chunks refused (host) '
      '| pages refused (Redis) | MB to host | MB to Redis |')
print('|' + '---|' * 14)
cross = {}
for k in range(1, n + 1):
    name = open(f'{w}/name.{k}').read().strip() or '(defaults)'
    for i in (1, 2):
        m = open(f'{w}/m{i}.{k}').read()
        ld = json.load(open(f'{w}/load{i - 1}.{k}.json'))
        al = ld['classes']['all']
        q = metric(m, 'fairkv_prefix_queries_tokens_total')
        dev = metric(m, 'fairkv_tier_hit_tokens_total{tier="device"}')
        host = metric(m, 'fairkv_tier_hit_tokens_total{tier="host"}')
        rem = metric(m, 'fairkv_remote_hit_tokens_total')
        refused_host = metric(m, 'fairkv_tier_refused_total{tier="device"}')
        to_host = (metric(m, 'fairkv_tier_demoted_bytes_total{tier="device"}') or 0) / 1e6
        to_redis = (metric(m, 'fairkv_remote_bytes_total{direction="written"}') or 0) / 1e6
        tot = (dev or 0) + (host or 0) + (rem or 0)
        foreign = metric(m, 'fairkv_remote_foreign_hits_total')
        if i == 2:
            cross[name] = foreign or 0
        print(f'| {name} | {i} | {al["ok"]} / {al["sent"]} | {fmt(q)} | {fmt(dev)} | {fmt(host)} | {fmt(rem)} '
              f'| {fmt(100 * tot / q if q else None, 2)} | {fmt(metric(m, "fairkv_remote_hits_total"))} | {fmt(foreign)} '
              f'| {fmt(refused_host)} | {fmt(metric(m, "fairkv_remote_refused_total"))} '
              f'| {fmt(to_host, 1)} | {fmt(to_redis, 1)} |')
print()
for name, f in cross.items():
    print(f'check: {name}: instance 2 hit pages instance 1 wrote to Redis: ' + (f'yes ({f:.0f} pages)' if f > 0 else 'NO'))
EOF
