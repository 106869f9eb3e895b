"""The serving simulator from Python.

The simulator is the ``fairkv`` command's code, not the library's, so
``bench`` and ``frontier`` run the installed ``fairkv`` binary with
``--format json`` and return its document parsed (key order kept): the
same result as ``fairkv bench --format json``, as Python objects.

The binary is, in order: $FAIRKV_BIN, ``<prefix>/bin/fairkv`` of the
library the package was built against (pkg-config's prefix), ``fairkv`` on
PATH.
"""
from __future__ import annotations

import json
import os
import shutil
import subprocess
from typing import Any, Dict, Iterable, List, Optional, Sequence

from ._core import Error
from ._native import ffi, lib

# keyword -> (flag, kind): the one table that maps options to the CLI.
# kind: "value" (str(value)), "flag" (True adds it, False omits it), "list"
# (comma-joined).
_OPTIONS: Dict[str, tuple] = {
    "workload": ("--workload", "value"),
    "trace": ("--trace", "value"),
    "trace_format": ("--trace-format", "value"),
    "requests": ("--requests", "value"),
    "load": ("--load", "value"),
    "native": ("--native", "flag"),
    "time_scale": ("--time-scale", "value"),
    "seed": ("--seed", "value"),
    "clients": ("--clients", "value"),
    "tenants": ("--tenants", "value"),
    "tenant_weights": ("--tenant-weights", "list"),
    "tenant_assign": ("--tenant-assign", "value"),
    "quotas": ("--quotas", "value"),
    "victim": ("--victim", "value"),
    "reclaim": ("--reclaim", "list"),
    "host_gb": ("--host-gb", "value"),
    "host_demote": ("--host-demote", "flag"),
    "host_x": ("--host-x", "value"),
    "remote_gb": ("--remote-gb", "value"),
    "remote_gbps": ("--remote-gbps", "value"),
    "remote_latency_ms": ("--remote-latency-ms", "value"),
    "vtc_mem": ("--vtc-mem", "value"),
    "tenant_step_share": ("--tenant-step-share", "value"),
    "admit_reclaim": ("--admit-reclaim", "flag"),
    "step_bound": ("--step-bound", "value"),
    "private_prefix": ("--private-prefix", "flag"),
    "profile": ("--profile", "value"),
    "step_coeffs": ("--step-coeffs", "list"),
    "capacity_frac": ("--capacity-frac", "value"),
    "capacity_tokens": ("--capacity-tokens", "value"),
    "capacity_gb": ("--capacity-gb", "value"),
    "frontier_tol": ("--frontier-tol", "value"),
    "frontier_max": ("--frontier-max", "value"),
    "min_bound": ("--min-bound", "flag"),
    "max_batch_tokens": ("--max-batch-tokens", "value"),
    "max_running": ("--max-running", "value"),
    "no_chunked_prefill": ("--no-chunked-prefill", "flag"),
    "batching": ("--batching", "value"),
    "batch_window_ms": ("--batch-window-ms", "value"),
    "admission": ("--admission", "value"),
    "miss": ("--miss", "value"),
    "alpha": ("--alpha", "value"),
    "beta": ("--beta", "value"),
    "temperature": ("--temperature", "value"),
    "min_retention_ms": ("--min-retention-ms", "value"),
    "quant": ("--quant", "value"),
    "quant_dtype": ("--quant-dtype", "value"),
    "quant_hot": ("--quant-hot", "value"),
}


def fairkv_binary() -> Optional[str]:
    """Path of the fairkv command bench/frontier run, or None."""
    env = os.environ.get("FAIRKV_BIN")
    if env:
        return env
    prefix = ffi.string(lib.fkv_py_prefix()).decode()
    cand = os.path.join(prefix, "bin", "fairkv")
    if os.access(cand, os.X_OK):
        return cand
    return shutil.which("fairkv")


def bench_args(workload: Optional[str] = None, schemes: Optional[Iterable[str]] = None, **options: Any) -> List[str]:
    """The CLI arguments (after ``fairkv bench``) that bench() runs."""
    unknown = sorted(k for k in options if k not in _OPTIONS)
    if unknown:
        raise Error(lib.FKV_EINVAL, f"fairkv.bench: unknown option(s) {', '.join(unknown)} "
                                    f"(known: {', '.join(sorted(_OPTIONS))})")
    args: List[str] = []
    if workload is not None:
        args += ["--workload", str(workload)]
    if schemes is not None:
        if isinstance(schemes, str):
            schemes = [schemes]
        args += ["--schemes", ",".join(schemes)]
    for key, value in options.items():
        flag, kind = _OPTIONS[key]
        if value is None:
            continue
        if kind == "flag":
            if value not in (True, False):
                raise Error(lib.FKV_EINVAL, f"fairkv.bench: {key} is a switch (True/False), got {value!r}")
            if value:
                args.append(flag)
        elif kind == "list":
            vals = [value] if isinstance(value, (str, int, float)) else list(value)
            args += [flag, ",".join(str(v) for v in vals)]
        else:
            args += [flag, str(value)]
    return args


def _run(args: List[str], raw: bool) -> Any:
    exe = fairkv_binary()
    if exe is None:
        raise Error(lib.FKV_ENOENT, "fairkv.bench: no fairkv command found (set FAIRKV_BIN, or install the "
                                    "CLI beside the library)")
    cmd = [exe, "bench", *args, "--format", "json", "--quiet"]
    proc = subprocess.run(cmd, capture_output=True)
    if proc.returncode != 0:
        msg = proc.stderr.decode("utf-8", "replace").strip() or f"exit status {proc.returncode}"
        raise Error(lib.FKV_EINVAL, f"fairkv bench: {msg}")
    if raw:
        return proc.stdout
    try:
        return json.loads(proc.stdout)
    except json.JSONDecodeError as e:
        raise Error(lib.FKV_EPARSE, f"fairkv bench: output is not JSON ({e})") from e


def bench(workload: Optional[str] = None, schemes: Optional[Iterable[str]] = None, *, raw: bool = False,
          **options: Any) -> Any:
    """Runs the simulator (``fairkv bench``) and returns its JSON result as
    Python objects (dicts keep the CLI's key order).  Options are the CLI's
    flags with underscores: ``requests=200, load=0.9, host_gb=4,
    host_demote=True, reclaim=["quantize8", "evict"]``.  An unknown option
    raises fairkv.Error naming it.  raw=True returns the CLI's bytes."""
    return _run(bench_args(workload, schemes, **options), raw)


def frontier(workload: Optional[str] = None, schemes: Optional[Iterable[str]] = None, *, raw: bool = False,
             **options: Any) -> Any:
    """``fairkv bench --frontier``: per scheme the smallest capacity at
    which latency stays within 5% of oracle-memory."""
    return _run(bench_args(workload, schemes, **options) + ["--frontier"], raw)


def table(result: Dict[str, Any], columns: Optional[Sequence[str]] = None) -> str:
    """A plain-text table of a bench() result's schemes, one row each (no
    pandas).  columns: top-level scheme keys or dotted paths such as
    ``e2e.p99_ms``; default: hit rates and e2e latency."""
    rows = result.get("schemes", [])
    if columns is None:
        columns = ["prefix_hit_rate", "cache_hit_rate", "e2e.mean_ms", "e2e.p99_ms", "ttft.p99_ms", "preemptions"]

    def get(row: Dict[str, Any], path: str) -> Any:
        cur: Any = row
        for part in path.split("."):
            if not isinstance(cur, dict) or part not in cur:
                return ""
            cur = cur[part]
        return cur

    def fmt(v: Any) -> str:
        return f"{v:.4g}" if isinstance(v, float) else str(v)

    header = ["name", *columns]
    body = [[str(r.get("name", "")), *(fmt(get(r, c)) for c in columns)] for r in rows]
    widths = [max(len(h), *(len(b[i]) for b in body)) if body else len(h) for i, h in enumerate(header)]
    lines = ["  ".join(h.ljust(w) for h, w in zip(header, widths))]
    lines += ["  ".join(c.ljust(w) for c, w in zip(b, widths)) for b in body]
    return "\n".join(lines) + "\n"
