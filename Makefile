# Thin wrapper over CMake: the two commands of the README (make run, make test)
# plus deps, fuzz and clean.  Build trees: build/ (release, warnings as
# errors), build-asan/ (ASan+UBSan), build-tsan/ (ThreadSanitizer).

JOBS ?= $(shell nproc 2>/dev/null || echo 2)
CMAKE ?= cmake
FUZZ_SECONDS ?= 60
# Debian packages needed to build and test; checked with dpkg-query.  A
# package whose command is on PATH also counts as present: NodeSource's
# nodejs bundles npm, and installing Debian's npm beside it would conflict.
DEB_PKGS = cmake make gcc clang libclang-rt-14-dev pkg-config libxxhash-dev libcjson-dev gnuplot-nox libmicrohttpd-dev libcurl4-openssl-dev libssl-dev prometheus nodejs npm libutf8proc-dev python3-jinja2 python3-numpy redis-server libhiredis-dev python3 python3-venv python3-pip python3-setuptools python3-wheel python3-dev python3-cffi python3-pytest python3-redis libopenblas-pthread-dev

.PHONY: all build deps test test-release test-asan test-tsan run fuzz fuzz-build fuzz-smoke clean

all: build

deps:
	@missing=""; for p in $(DEB_PKGS); do \
	  dpkg-query -W -f='$${Status}' $$p 2>/dev/null | grep -q 'install ok installed' \
	    || command -v $$p >/dev/null 2>&1 || missing="$$missing $$p"; \
	done; \
	if [ -z "$$missing" ]; then echo "deps: all Debian packages present"; \
	elif [ "$$(id -u)" = 0 ]; then echo "deps: installing$$missing"; \
	  (apt-get update -qq || true) && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $$missing; \
	else echo "deps: missing packages; run as root:"; echo "  apt-get install -y$$missing"; exit 1; fi

build/Makefile: CMakeLists.txt
	$(CMAKE) -S . -B build -DCMAKE_BUILD_TYPE=RelWithDebInfo -DFKV_WERROR=ON

build: deps build/Makefile
	$(CMAKE) --build build -j $(JOBS)

test-release: build
	cd build && ctest --output-on-failure -j $(JOBS)

test-asan: deps
	$(CMAKE) -S . -B build-asan -DCMAKE_BUILD_TYPE=Debug -DFKV_WERROR=ON -DFKV_SANITIZE=ON
	$(CMAKE) --build build-asan -j $(JOBS)
	cd build-asan && ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1 \
	  FKV_TEST_SCALE=0.25 ctest --output-on-failure -j $(JOBS)

# ThreadSanitizer on the tests where threads meet.
test-tsan: deps
	$(CMAKE) -S . -B build-tsan -DCMAKE_BUILD_TYPE=RelWithDebInfo -DFKV_WERROR=ON -DFKV_TSAN=ON
	$(CMAKE) --build build-tsan -j $(JOBS)
	cd build-tsan && ctest --output-on-failure -R 'threads|server|load'

test: test-release test-asan test-tsan fuzz-smoke
	@echo "make test: release, ASan+UBSan and TSan suites and the fuzz regression runs passed"

# In make test the fuzzers are deterministic: every committed corpus file
# (the crash regressions among them) once, then a fixed-seed bounded
# exploration, so a given commit passes or fails the same way every time.
# `make fuzz` is the open-ended search.
fuzz-build: deps
	CC=clang $(CMAKE) -S . -B build-fuzz -DCMAKE_BUILD_TYPE=RelWithDebInfo -DFKV_FUZZ=ON -DFKV_SANITIZE=ON -DFKV_WERROR=ON
	$(CMAKE) --build build-fuzz -j $(JOBS)

fuzz-smoke: fuzz-build
	@for f in build-fuzz/fuzz_*; do [ -x $$f ] || continue; n=$$(basename $$f); \
	  work=build-fuzz/smoke-$$n; rm -rf $$work; mkdir -p $$work; \
	  seeds=""; [ -d fuzz/corpus/$$n ] && seeds=fuzz/corpus/$$n; \
	  if [ -n "$$seeds" ]; then $$f -runs=0 $$seeds > $$work.log 2>&1 \
	    || { tail -30 $$work.log; echo "fuzz regression: $$n FAILED"; exit 1; }; fi; \
	  $$f -seed=1 -runs=20000 -rss_limit_mb=4096 $$work $$seeds >> $$work.log 2>&1 \
	    || { tail -30 $$work.log; echo "fuzz smoke: $$n FAILED"; exit 1; }; \
	  echo "fuzz: $$n: corpus and 20000 fixed-seed runs clean"; done

run: build
	./build/fairkv run

fuzz: fuzz-build
	@for f in build-fuzz/fuzz_*; do [ -x $$f ] || continue; n=$$(basename $$f); \
	  echo "fuzz: $$n for $(FUZZ_SECONDS)s"; mkdir -p build-fuzz/corpus/$$n; \
	  seeds=""; [ -d fuzz/corpus/$$n ] && seeds=fuzz/corpus/$$n; \
	  $$f -max_total_time=$(FUZZ_SECONDS) -rss_limit_mb=4096 build-fuzz/corpus/$$n $$seeds > build-fuzz/$$n.log 2>&1 \
	    || { tail -30 build-fuzz/$$n.log; echo "fuzz: $$n FAILED"; exit 1; }; \
	  tail -1 build-fuzz/$$n.log; done

clean:
	rm -rf build build-asan build-tsan build-fuzz
