#!/usr/bin/env python3
"""What the light tenants' slowest first tokens waited through, from a step
trace (`fairkv bench --step-trace FILE`, docs/OPERATIONS.md).

usage: scripts/step_floor.py TRACE [--scheme NAME] [--light N]

Tenants 1..N are light (the `tenants` workload: 4), the rest heavy.  Prints
a markdown summary: the light TTFT percentiles read from the trace; the
steps each light request at or above the P99 waited through (the step
running at its arrival up to the one that emitted its first token) with
their composition; and the time of steps that carried decodes and nothing
else, by the number of heavy decodes in them: the least a step holding
those decodes takes, whatever else a scheduler leaves out of it.
"""
import argparse
import statistics
import sys


def read(path, scheme):
    steps = []
    with open(path) as f:
        for line in f:
            if line.startswith("#"):
                continue
            fld = line.split()
            if fld[0] != scheme:
                continue
            items = []
            for it in fld[5:]:
                t, kind, nn, ctx, rest, rid, arr, first = it.split(",")
                items.append((int(t), kind, int(nn), int(ctx), int(rest), int(rid), int(arr), int(first)))
            steps.append((int(fld[1]), int(fld[2]), items))
    return steps


def shape(items, light):
    s = {"heavy decodes": 0, "heavy decode ctx": 0, "light decodes": 0, "heavy prompt tok": 0, "light prompt tok": 0}
    for t, kind, nn, ctx, rest, rid, arr, first in items:
        side = "light" if 1 <= t <= light else "heavy"
        if kind == "D":
            s[side + " decodes"] += 1
            if side == "heavy":
                s["heavy decode ctx"] += ctx
        else:
            s[side + " prompt tok"] += nn + rest
    return s


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("trace")
    ap.add_argument("--scheme", default="fairkv")
    ap.add_argument("--light", type=int, default=4)
    a = ap.parse_args()
    steps = read(a.trace, a.scheme)
    if not steps:
        sys.exit(f"{a.trace}: no steps of scheme {a.scheme}")
    starts = [s[0] for s in steps]
    firsts = []  # (ttft ns, arrival, index of the emitting step)
    for k, (t0, t1, items) in enumerate(steps):
        for t, kind, nn, ctx, rest, rid, arr, first in items:
            if first and 1 <= t <= a.light:
                firsts.append((t1 - arr, arr, k))
    firsts.sort()
    n = len(firsts)
    if not n:
        sys.exit("no light first tokens in the trace")
    p50, p99 = firsts[n // 2][0], firsts[min(n - 1, int(0.99 * n))][0]
    print(f"scheme {a.scheme}: {len(steps)} steps, {n} light first tokens; TTFT P50 {p50 / 1e6:.1f} ms, "
          f"P99 {p99 / 1e6:.1f} ms\n")
    tail = [f for f in firsts if f[0] >= p99]
    waited, own, count = [], [], []
    comp = {}
    import bisect
    for ttft, arr, k in tail:
        j = max(0, bisect.bisect_right(starts, arr) - 1)
        count.append(k - j + 1)
        waited.append((steps[k][0] - arr) / 1e6)
        own.append((steps[k][1] - steps[k][0]) / 1e6)
        for s in steps[j:k + 1]:
            for key, v in shape(s[2], a.light).items():
                comp.setdefault(key, []).append(v)
    print(f"light first tokens at or above the P99 ({len(tail)}): median of")
    print("| steps waited through (incl. its own) | ms before its own step | its own step (ms) |")
    print("|---|---|---|")
    print(f"| {statistics.median(count):.0f} | {statistics.median(waited):.1f} | {statistics.median(own):.1f} |\n")
    print("those steps' shape (median over the steps):")
    print("| " + " | ".join(comp) + " |")
    print("|" + "---|" * len(comp))
    print("| " + " | ".join(f"{statistics.median(v):.0f}" for v in comp.values()) + " |\n")
    by = {}
    for t0, t1, items in steps:
        s = shape(items, a.light)
        if s["heavy prompt tok"] or s["light prompt tok"] or not s["heavy decodes"]:
            continue
        by.setdefault(s["heavy decodes"], []).append(((t1 - t0) / 1e6, s["heavy decode ctx"], s["light decodes"]))
    print("steps of decodes only, by heavy decodes in them:")
    print("| heavy decodes | steps | median ms | median heavy context (tokens) | median light decodes |")
    print("|---|---|---|---|---|")
    for h in sorted(by):
        v = by[h]
        print(f"| {h} | {len(v)} | {statistics.median(x[0] for x in v):.1f} | "
              f"{statistics.median(x[1] for x in v):.0f} | {statistics.median(x[2] for x in v):.0f} |")


if __name__ == "__main__":
    main()
