#!/bin/sh
# The Python package (python/) as a user gets it: the library installed into
# a scratch prefix, a scratch virtual environment over Debian's python3
# (--system-site-packages: numpy, cffi, pytest come from Debian), the
# package pip-installed offline against the installed fairkv.pc, then its
# pytest suite.  Mode "asan": the library is the sanitized build and ASan's
# runtime is preloaded into the (uninstrumented) interpreter, so a use after
# free behind the bindings (the lifetime tests close caches before their
# sequences and views) is reported, not silent.  Skips (77) only when
# Debian's Python pieces are absent.
set -eu
build=$1 src=$2 cc=$3 mode=${4:-release}
py=${FKV_PYTHON:-}
if [ -z "$py" ]; then
  if [ -x /usr/bin/python3 ]; then py=/usr/bin/python3; else py=$(command -v python3 || true); fi
fi
[ -n "$py" ] || { echo "SKIP: no python3 (Debian: apt-get install python3)"; exit 77; }
for m in venv:python3-venv numpy:python3-numpy cffi:python3-cffi pytest:python3-pytest \
         setuptools:python3-setuptools pip:python3-pip wheel:python3-wheel; do
  "$py" -c "import ${m%%:*}" 2>/dev/null || { echo "SKIP: $py cannot import ${m%%:*} (Debian: ${m#*:})"; exit 77; }
done
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cmake --install "$build" --prefix "$tmp/prefix" >/dev/null
export PKG_CONFIG_PATH="$tmp/prefix/lib/pkgconfig:$tmp/prefix/lib64/pkgconfig:$tmp/prefix/lib/x86_64-linux-gnu/pkgconfig"
"$py" -m venv --system-site-packages --without-pip "$tmp/venv"
# build from a copy: the source tree gets no build/ or egg-info
cp -r "$src/python" "$tmp/pkg"
rm -rf "$tmp/pkg/build" "$tmp/pkg"/*.egg-info
"$tmp/venv/bin/python" -m pip install --no-build-isolation --no-index --quiet --disable-pip-version-check "$tmp/pkg"
export FKV_SOURCE_DIR="$src" PYTHONDONTWRITEBYTECODE=1
cd "$tmp/pkg/tests"
if [ "$mode" = asan ]; then
  asan=$("$cc" -print-file-name=libasan.so)
  [ -f "$asan" ] || { echo "no libasan.so beside $cc"; exit 1; }
  # CPython's own allocations are not leaks of the library: leak checking off
  LD_PRELOAD="$asan" ASAN_OPTIONS=detect_leaks=0:abort_on_error=0 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
    "$tmp/venv/bin/python" -m pytest -q -p no:cacheprovider .
else
  "$tmp/venv/bin/python" -m fairkv --version
  "$tmp/venv/bin/python" -m pytest -q -p no:cacheprovider .
fi
