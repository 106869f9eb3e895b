#!/bin/sh
# Installs the build into a scratch prefix and builds the README example
# with `pkg-config fairkv`, static and shared, then runs both.
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
LD_LIBRARY_PATH="$(pkg-config --variable=libdir fairkv)" "$tmp/qs-shared" | grep -q "tokens reused"
"$tmp/qs-static" | grep -q "tokens reused"
echo "pkg-config build: 2 passed, 0 failed"
