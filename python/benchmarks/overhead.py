"""Per-call cost of Sequence.append and Sequence.touch from Python, beside
the C figures of `fairkv micro cache --only ops`, measured alternately in
one run (medians over the rounds).

The Python loop is the C benchmark's own: a cache of 65,536 pages of 16
tokens (phantom storage, the default configuration), 512 requests of 64
pages appended one page (16 token ids, a numpy int32 array) per call, then
4 touches of every request (16 chunks each).  The C figures are per page
and per chunk; a C touch call here is 16 chunks, so its per-call figure is
16 x touch_chunk.

    python benchmarks/overhead.py [--rounds 7] [--json]
"""
import argparse
import json
import statistics
import subprocess
import sys
import time

import numpy as np

import fairkv

SEQS, SEQ_PAGES, PT = 512, 64, 16


def tokens(r):
    i = np.arange(SEQ_PAGES * PT, dtype=np.uint64)
    t = ((np.uint64(r) * np.uint64(1000003) + i * np.uint64(7919)) & np.uint64(0x7FFFFFFF)).astype(np.int32)
    return [t[p * PT:(p + 1) * PT] for p in range(SEQ_PAGES)]


def py_round(toks, want_slots):
    cache = fairkv.Cache(capacity_pages=65536, page_tokens=PT)
    seqs = []
    append_ns = 0
    for i in range(SEQS):
        s = cache.sequence(request_id=i + 1)
        seqs.append(s)
        pages = toks[i]
        t0 = time.perf_counter_ns()
        for p in pages:
            s.append(p, slots=want_slots)
        append_ns += time.perf_counter_ns() - t0
    seqs[0].touch()
    t0 = time.perf_counter_ns()
    for _ in range(4):
        for s in seqs:
            s.touch()
    touch_ns = time.perf_counter_ns() - t0
    cache.close()
    return append_ns / (SEQS * SEQ_PAGES), touch_ns / (4 * SEQS)


def raw_round(toks):
    """The same calls through cffi's lib directly, pointers made untimed:
    the floor of any cffi binding (the wrapper's checks excluded)."""
    from fairkv._native import ffi, lib
    cache = fairkv.Cache(capacity_pages=65536, page_tokens=PT)
    seqs = []
    append_ns = 0
    for i in range(SEQS):
        s = cache.sequence(request_id=i + 1)
        seqs.append(s)
        ptrs = [ffi.from_buffer("int32_t[]", p) for p in toks[i]]
        sp = s._ptr
        t0 = time.perf_counter_ns()
        for p in ptrs:
            lib.fkv_seq_append(sp, p, PT, ffi.NULL)
        append_ns += time.perf_counter_ns() - t0
    ptrs = [s._ptr for s in seqs]
    t0 = time.perf_counter_ns()
    for _ in range(4):
        for sp in ptrs:
            lib.fkv_seq_touch(sp, ffi.NULL)
    touch_ns = time.perf_counter_ns() - t0
    cache.close()
    return append_ns / (SEQS * SEQ_PAGES), touch_ns / (4 * SEQS)


def c_round(exe):
    out = subprocess.run([exe, "micro", "cache", "--json", "--only", "ops", "--rounds", "1"], check=True,
                         capture_output=True, text=True).stdout
    ops = {o["name"]: o["ns_per_op"] for o in json.loads(out)["ops"]}
    chunks_per_seq = SEQ_PAGES * PT // 64
    return ops["append_page"], ops["touch_chunk"] * chunks_per_seq


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args()
    exe = fairkv.fairkv_binary()
    if exe is None:
        sys.exit("no fairkv command found (set FAIRKV_BIN)")
    toks = [tokens(i) for i in range(SEQS)]
    py, pyn, raw, c = [], [], [], []
    for _ in range(a.rounds):
        c.append(c_round(exe))
        py.append(py_round(toks, True))
        pyn.append(py_round(toks, False))
        raw.append(raw_round(toks))
    med = lambda xs, k: statistics.median(x[k] for x in xs)
    res = {"rounds": a.rounds, "python_append_ns": med(py, 0), "python_append_noslots_ns": med(pyn, 0),
           "python_append_rawcffi_ns": med(raw, 0), "c_append_ns": med(c, 0),
           "python_touch_ns": med(py + pyn, 1), "python_touch_rawcffi_ns": med(raw, 1), "c_touch_ns": med(c, 1)}
    if a.json:
        print(json.dumps(res))
        return
    print(f"per call, medians of {a.rounds} alternated rounds:")
    for op, key in (("append", "append"), ("append, slots=False", "append_noslots"),
                    ("append, raw cffi", "append_rawcffi"), ("touch", "touch"), ("touch, raw cffi", "touch_rawcffi")):
        p, cc = res[f"python_{key}_ns"], res[f"c_{op.split(',')[0]}_ns"]
        print(f"  {op:20s}  python {p:7.0f} ns   C {cc:6.0f} ns   python - C {p - cc:7.0f} ns   ratio {p / cc:5.1f}")


if __name__ == "__main__":
    main()
