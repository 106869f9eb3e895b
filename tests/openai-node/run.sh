#!/bin/sh
# ctest's test_openai_node: installs the pinned official OpenAI Node client
# (package-lock.json) into the build tree with `npm ci`, then runs
# client.mjs, which starts `fairkv serve` on the stories260K model and drives
# it with the client.  Exit 77 (skip) when node or npm is missing, when the
# npm registry cannot be reached, or when the model file is absent.
#   run.sh BUILD_DIR SOURCE_DIR
set -u
# absolute: the script changes directory before it starts the server
build=$(cd "$1" && pwd) && src=$(cd "$2" && pwd) || exit 1
here=$src/tests/openai-node
work=$build/openai-node
data=${FKV_DATA_DIR:-$src/../shared/data}
model=$(cd "$data" 2>/dev/null && pwd)/models/stories260K-llamacpp.gguf

for tool in node npm; do
  command -v $tool >/dev/null 2>&1 || { echo "SKIP: $tool not found on PATH (Debian packages nodejs, npm)"; exit 77; }
done
[ -f "$model" ] || { echo "SKIP: model file not found: $data/models/stories260K-llamacpp.gguf"; exit 77; }

mkdir -p "$work" || exit 1
cp "$here/package.json" "$here/package-lock.json" "$here/client.mjs" "$work/" || exit 1
cd "$work" || exit 1
# An install matching the lockfile is kept, so a rerun works offline.
want=$(node -e 'console.log(require("./package-lock.json").packages["node_modules/openai"].version)')
have=$(node -e 'try{console.log(require("./node_modules/openai/package.json").version)}catch(e){}' 2>/dev/null)
if [ "$have" != "$want" ]; then
  # bounded retries: offline, npm would otherwise keep retrying for minutes;
  # and a bound on the whole install, which a slow or stalled registry
  # (DNS, a proxy) can otherwise stretch past ctest's timeout
  echo "npm ci: installing openai@$want ($(date -u +%T))"
  if ! timeout -k 10 150 npm ci --no-audit --no-fund --loglevel=error --fetch-retries=1 \
       --fetch-retry-maxtimeout=10000 --fetch-timeout=30000 > npm-ci.log 2>&1; then
    tail -5 npm-ci.log
    echo "SKIP: npm ci could not install openai@$want within 150 s (registry unreachable or stalled?); see $work/npm-ci.log"
    exit 77
  fi
  echo "npm ci: done ($(date -u +%T))"
fi
# node's own watchdog stops the test at 120 s; this bound holds even if
# that cannot run (ctest's timeout would kill it with no word of where)
echo "node client.mjs: start ($(date -u +%T))"
timeout -k 10 170 node client.mjs "$build/fairkv" "$model"
rc=$?
[ $rc -eq 124 ] || [ $rc -eq 137 ] && echo "FAIL - node client.mjs still running after 170 s ($(date -u +%T))"
exit $rc
