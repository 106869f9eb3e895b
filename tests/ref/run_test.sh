#!/bin/sh
# ctest's test_ref_generate: fairkv's greedy generation against the numpy
# reference (llama2c_ref.py); see test_ref_generate.py.  /usr/bin/python3 is
# named on purpose: a python3 earlier on PATH (pyenv, a venv) may lack numpy,
# which the Debian package python3-numpy provides to the system one.  Exit 77
# (skip) when either is missing; the driver skips when a data file is.
#   run_test.sh BUILD_DIR SOURCE_DIR
set -u
py=/usr/bin/python3
[ -x "$py" ] || { echo "SKIP: $py not found (Debian package python3)"; exit 77; }
"$py" -c 'import numpy' 2>/dev/null || { echo "SKIP: numpy not importable by $py (Debian package python3-numpy)"; exit 77; }
exec "$py" "$2/tests/ref/test_ref_generate.py" "$1/fairkv" "${FKV_DATA_DIR:-$2/../shared/data}"
