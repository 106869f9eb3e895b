#!/bin/sh
# The engine's prompt (prefill) and decode throughput, for docs/EVALUATION.md
# (section 4, "The engine's matrix products through BLAS").  Models:
# stories260K (converted from ../shared/data) and the `prefill` preset
# (`fairkv model init --preset prefill`, random weights, context 4096).
#
#   prompt tok/s, 1 sequence:  `generate -n 1` on a PROMPT_TOKENS-token prompt,
#                              prompt tokens / the engine's wall time
#   prompt tok/s, 16 sequences: `fairkv serve`, 16 concurrent requests of
#                              distinct PROMPT_TOKENS/16-token prompts (max_tokens 1):
#                              prompt tokens / wall time (HTTP included)
#   decode tok/s, 1 and 16:    `generate --temperature 0 -n DECODE` after a
#                              short prompt, --n 1 or 16 forked samples
#                              (--temperature 1, so the 16 samples differ)
#   TTFT of a 40-token prompt alone (serve, one request at a time, max_tokens
#   1) against its compute time (the step that prefilled it, --step-log)
#
# Each figure is the median of RUNS (5) runs; with two binaries, runs
# alternate old, new, old, new, ... and the table gives new / old.  Then the
# same new-binary figures with a co-runner: one busy process (a shell loop)
# on the machine for the whole measurement.
#
#   scripts/bench_engine.sh NEW_BINARY [OLD_BINARY] [DATA_DIR]
#   env: THREADS (2), RUNS (5), PROMPT_TOKENS (1000), DECODE (200),
#        CORUNNER_ONLY=1: only the co-runner table; TTFT_ONLY=1: only the TTFT
#
# Not part of CI: about 5-10 minutes with an old binary beside; needs curl.
set -eu
NEW=$1
OLD=${2:-}
D=${3:-../shared/data}/models
THREADS=${THREADS:-2} RUNS=${RUNS:-5} PT=${PROMPT_TOKENS:-1000} DEC=${DECODE:-200}
W=$(mktemp -d)
SP= BUSY=
cleanup() {
  if [ -n "$SP" ]; then kill "$SP" 2>/dev/null || true; fi
  if [ -n "$BUSY" ]; then kill "$BUSY" 2>/dev/null || true; fi
  rm -rf "$W"
}
trap cleanup EXIT
med() { sort -g | awk '{a[NR] = $1} END {print a[int((NR + 1) / 2)]}'; }
"$NEW" model convert --llama2c "$D/stories260K.bin" --tokenizer "$D/tok512.bin" --out "$W/stories260K.gguf" >/dev/null
"$NEW" model init --preset prefill --out "$W/prefill.gguf" >/dev/null
# byte-level / tok512 prompts of about PT tokens: words, so tok512 merges some
words() { awk -v n="$1" -v s="$2" 'BEGIN { srand(s); split("the cat sat on a mat and then ran far away from home to see", w, " ");
  o = ""; while (length(o) < n) o = o w[int(rand() * 15) + 1] " "; printf "%s", substr(o, 1, n) }'; }

# seconds of the engine's run ("engine: prompt N tokens, M generated ... in X s")
eng_s() { sed -n 's/^engine: prompt .* in \([0-9.]*\) s (.*/\1/p'; }
eng_rate() { sed -n 's/^engine: prompt .*(\([0-9.]*\) tok\/s).*/\1/p'; }
eng_prompt() { sed -n 's/^engine: prompt \([0-9]*\) tokens.*/\1/p'; }

# prefill1 BIN MODEL: prompt tokens/s of one PT-token prompt
prefill1() {
  out=$("$1" generate --model "$2" --prompt "$(words "$PT" 1)" -n 1 --engine --threads "$THREADS" \
        --kv-budget 512MiB --chunk 256 --ids 2>&1 >/dev/null)
  n=$(echo "$out" | eng_prompt) s=$(echo "$out" | eng_s)
  echo "$n / $s" | bc -l
}
# decode BIN MODEL N: generated tokens/s of N samples
decode() {
  "$1" generate --model "$2" --prompt "Once upon a time" -n "$DEC" --temperature 1 --seed 7 --engine --n "$3" \
    --threads "$THREADS" --kv-budget 512MiB --ids 2>&1 >/dev/null | eng_rate
}
# serve BIN MODEL: starts a server, sets URL
serve_start() {
  "$1" serve --port 0 --model "$2" --threads "$THREADS" --kv-budget 512MiB --max-running 16 ${3:-} > "$W/serve.log" 2>&1 &
  SP=$!
  for t in $(seq 300); do grep -q 'http://127.0.0.1:' "$W/serve.log" && break; sleep 0.1; done
  URL=$(grep -o 'http://127.0.0.1:[0-9]*' "$W/serve.log" | head -1)
}
serve_stop() { kill "$SP"; wait "$SP" 2>/dev/null || true; SP=; }
# prefill16 MODELNAME: prompt tokens/s of 16 concurrent distinct prompts
prefill16() {
  t0=$(date +%s.%N) pids=
  for j in $(seq 16); do
    p=$(words $((PT / 16)) "$j")
    curl -sf -H 'Content-Type: application/json' \
      -d "{\"model\":\"$1\",\"prompt\":\"$p\",\"max_tokens\":1,\"temperature\":0}" "$URL/v1/completions" > "$W/r$j" &
    pids="$pids $!"
  done
  wait $pids || true # a failed request counts no tokens (its file is empty)
  t1=$(date +%s.%N)
  tok=$( (echo 0; cat $(seq -f "$W/r%g" 16) | grep -o '"prompt_tokens":[0-9]*' | cut -d: -f2) | paste -sd+ | bc)
  echo "$tok / ($t1 - $t0)" | bc -l
}
# ttft MODELNAME SEED: seconds of one 40-token request (max_tokens 1), alone;
# each SEED another prompt, so that the prefix cache finds nothing
ttft() {
  curl -sf -o /dev/null -w '%{time_total}\n' -H 'Content-Type: application/json' \
    -d "{\"model\":\"$1\",\"prompt\":\"$(words 39 "$2")\",\"max_tokens\":1,\"temperature\":0}" "$URL/v1/completions"
}

# row LABEL FUNC ARGS...: RUNS alternating runs of FUNC with each binary
row() {
  label=$1; shift
  : > "$W/new"; : > "$W/old"
  for i in $(seq "$RUNS"); do
    if [ -n "$OLD" ]; then "$@" "$OLD" >> "$W/old"; fi
    "$@" "$NEW" >> "$W/new"
  done
  n=$(med < "$W/new")
  if [ -n "$OLD" ]; then
    o=$(med < "$W/old")
    printf '| %s | %.0f | %.0f | %.2f |\n' "$label" "$o" "$n" "$(echo "$n / $o" | bc -l)"
  else
    printf '| %s | %.0f |\n' "$label" "$n"
  fi
}
# argument order for row: the binary comes last
p1() { prefill1 "$2" "$W/$1.gguf"; }
d1() { decode "$3" "$W/$1.gguf" "$2"; }
p16() { serve_start "$2" "$W/$1.gguf"; prefill16 "$1"; serve_stop; }

table() {
  if [ -n "$OLD" ]; then echo "| tokens/s ($THREADS threads) | old | new | new / old |"; echo "|---|---:|---:|---:|"
  else echo "| tokens/s ($THREADS threads) | new |"; echo "|---|---:|"; fi
  for m in stories260K prefill; do
    row "$m, prompt, 1 sequence ($PT tokens)" p1 "$m"
    row "$m, prompt, 16 sequences (serve)" p16 "$m"
    row "$m, decode, 1 sequence" d1 "$m" 1
    row "$m, decode, 16 sequences" d1 "$m" 16
  done
}

echo "## $(date -u +%Y-%m-%d) $(uname -m), $(nproc) CPUs, THREADS=$THREADS RUNS=$RUNS"
if [ -z "${CORUNNER_ONLY:-}" ] && [ -z "${TTFT_ONLY:-}" ]; then
table
fi
if [ -z "${CORUNNER_ONLY:-}" ]; then
# TTFT of a 40-token prompt alone, new binary, preset model, against its
# compute time: the wall time of the engine step that prefilled it (the
# server's --step-log: one 40-token step per request), same server; the
# first request warms the server up and is left out of both
: > "$W/t"
serve_start "$NEW" "$W/prefill.gguf" "--step-log $W/steps.log"
ttft prefill 100 > /dev/null
for i in $(seq "$RUNS"); do ttft prefill "$i" >> "$W/t"; sleep 0.2; done
serve_stop
t=$(med < "$W/t") c=$(awk '!/^#/ && $2 >= 40 {print $5 / 1e9}' "$W/steps.log" | tail -n +2 | med)
printf 'prefill preset, 40-token prompt alone: TTFT median %.1f ms (serve, curl), its step %.1f ms (step log), ratio %.2f\n' \
  "$(echo "$t * 1000" | bc -l)" "$(echo "$c * 1000" | bc -l)" "$(echo "$t / $c" | bc -l)"
fi
[ -n "${TTFT_ONLY:-}" ] && exit 0
# the same with a co-runner: one busy process beside
echo "with a co-runner (one busy shell loop for the whole table):"
sh -c 'while :; do :; done' &
BUSY=$!
OLD= table
kill "$BUSY"; BUSY=
