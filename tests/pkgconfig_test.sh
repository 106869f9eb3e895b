#!/bin/sh
# Installs the build into a scratch prefix and builds, with `pkg-config
# fairkv` and the installed headers alone, the README example (static and
# shared) and one attention call (shared); runs all three, and checks that
# the shared library exports no internal symbol.
set -eu
build=$1 src=$2 cc=$3
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cmake --install "$build" --prefix "$tmp" >/dev/null
export PKG_CONFIG_PATH="$tmp/lib/pkgconfig:$tmp/lib64/pkgconfig:$tmp/lib/x86_64-linux-gnu/pkgconfig"
pkg-config --exists fairkv || { echo "fairkv.pc not installed"; exit 1; }
# shellcheck disable=SC2046
"$cc" -std=c11 "$src/examples/quickstart.c" -o "$tmp/qs-shared" $(pkg-config --cflags --libs fairkv)
# shellcheck disable=SC2046
"$cc" -std=c11 "$src/examples/quickstart.c" -o "$tmp/qs-static" $(pkg-config --cflags fairkv) \
  "$(pkg-config --variable=libdir fairkv)/libfairkv.a" $(pkg-config --libs-only-l --static fairkv | sed 's/-lfairkv//')
# one attention call, through the installed fairkv_attn.h and the shared library
# shellcheck disable=SC2046
"$cc" -std=c11 "$src/examples/attention.c" -o "$tmp/attn-shared" $(pkg-config --cflags --libs fairkv) -lm
LD_LIBRARY_PATH="$(pkg-config --variable=libdir fairkv)" "$tmp/qs-shared" | grep -q "tokens reused"
"$tmp/qs-static" | grep -q "tokens reused"
LD_LIBRARY_PATH="$(pkg-config --variable=libdir fairkv)" "$tmp/attn-shared" | grep -q "token 7's value"
# the shared library exports the public API only
if nm -D --defined-only "$(pkg-config --variable=libdir fairkv)/libfairkv.so" | grep -q ' fkv__'; then
  echo "libfairkv.so exports internal fkv__ symbols"; exit 1
fi
echo "pkg-config build: 4 passed, 0 failed"
