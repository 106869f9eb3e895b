#!/bin/sh
# Decode throughput on stories260K, for docs/EVALUATION.md: tokens/s of one
# sequence and of 16, through the engine (`fairkv generate --engine --stats`,
# 16 = --n 16 forked samples) and through the server (`fairkv serve`, 16 =
# 16 concurrent curl requests); the plain path (`fairkv generate`) beside
# them.  Greedy, 500 tokens after "Once upon a time"; medians of 5 runs.
# Server tokens/s: completion tokens of all requests / wall time from the
# first request sent to the last answer (HTTP and JSON included).
#
#   scripts/bench_decode.sh [BUILD_DIR] [DATA_DIR]     (defaults build ../shared/data)
#
# Not part of CI (about 20 s); needs curl and bc.
set -eu
B=${1:-build}/fairkv
D=${2:-../shared/data}/models
W=$(mktemp -d)
SP=
trap 'if [ -n "$SP" ]; then kill $SP; fi; rm -rf "$W"' EXIT
M=$W/stories260K.gguf N=500 P="Once upon a time"
"$B" model convert --llama2c "$D/stories260K.bin" --tokenizer "$D/tok512.bin" --out "$M" >/dev/null
med() { sort -g | awk '{a[NR] = $1} END {print a[int((NR + 1) / 2)]}'; }

for n in 1 16; do
  for i in 1 2 3 4 5; do
    "$B" generate --model "$M" --prompt "$P" -n $N --temperature 0 --engine --n $n --stats 2>&1 >/dev/null |
      sed -n 's/^engine: prompt.* \([0-9]*\) generated .*(\([0-9.]*\) tok\/s).*/\1 \2/p'
  done > "$W/e"
  echo "engine --n $n: $(cut -d' ' -f1 "$W/e" | sort -u) tokens/run; runs $(cut -d' ' -f2 "$W/e" | tr '\n' ' ')median $(cut -d' ' -f2 "$W/e" | med) tok/s"
done
for i in 1 2 3 4 5; do
  "$B" generate --model "$M" --prompt "$P" -n $N --temperature 0 2>&1 >/dev/null |
    sed -n 's/.*generated [0-9]* tokens in [0-9.]* s (\([0-9.]*\) tok\/s).*/\1/p'
done > "$W/p"
echo "generate (plain): runs $(tr '\n' ' ' < "$W/p")median $(med < "$W/p") tok/s"

"$B" serve --port 0 --model "$M" > "$W/serve.log" 2>&1 &
SP=$!
for t in $(seq 100); do grep -q 'http://127.0.0.1:' "$W/serve.log" && break; sleep 0.1; done
URL=$(grep -o 'http://127.0.0.1:[0-9]*' "$W/serve.log" | head -1)
body="{\"model\":\"stories260K\",\"prompt\":\"$P\",\"max_tokens\":$N,\"temperature\":0}"
for c in 1 16; do
  for i in 1 2 3 4 5; do
    t0=$(date +%s.%N) pids=
    for j in $(seq $c); do
      curl -sf -H 'Content-Type: application/json' -d "$body" "$URL/v1/completions" > "$W/r$j" & pids="$pids $!"
    done
    wait $pids
    t1=$(date +%s.%N)
    tok=$(cat $(seq -f "$W/r%g" $c) | grep -o '"completion_tokens":[0-9]*' | cut -d: -f2 | paste -sd+ | bc)
    echo "$tok $(echo "$tok / ($t1 - $t0)" | bc -l)"
  done > "$W/s"
  echo "serve, $c concurrent: $(cut -d' ' -f1 "$W/s" | sort -u) tokens/run; runs $(cut -d' ' -f2 "$W/s" | xargs printf '%.0f ')median $(cut -d' ' -f2 "$W/s" | med | xargs printf '%.0f') tok/s"
done
