#!/usr/bin/env python3
"""How far eviction orders can go on a Mooncake trace, without the server.

For docs/EVALUATION.md 3c ("How far an eviction order can go"): the trace's
requests are replayed in arrival order against caches of a fixed size in
tokens, with nothing else taking memory (no running requests, no compute,
no quantization), and the prefix hit rate each order finds is printed.
This separates what an order can find on the trace's reuse from what the
simulator's runs lose to the requests that hold memory while they run.

Model: a request's blocks (the trace's hash_ids, 512 tokens each, its last
one min(512, rest) tokens) are keyed by their chain (a block's key names
its whole prefix).  At arrival the request's leading blocks found in the
cache are its hit tokens; then every block of the request is touched or
inserted in order.  Two levels, as fairkv's device and host tier: the
device is LRU, a block it evicts goes down to the host, a host hit goes
back up and leaves the host (exclusive).  Orders of the host tier:

  lru          least recently demoted first
  s3fifo       S3-FIFO (Yang et al., SOSP 2023): small FIFO a tenth of the
               tier, main FIFO, ghost; a block's frequency counts its
               returns to the host (a read moves it up, as in fairkv)
  seen-first   blocks seen once so far (any level) leave first, oldest
               first, then the others by recency
  lru-2        LRU-K with K = 2 (O'Neil, O'Neil and Weikum, SIGMOD 1993):
               the oldest second-last access first; seen once = oldest
  hyperbolic   hyperbolic caching (Blankstein, Sen and Freedman, USENIX ATC
               2017): the least accesses per unit of time since first seen
               leaves first, among 64 blocks sampled (fixed seed)
  next-gap     the block whose next access, predicted as its last plus its
               last gap between accesses, is furthest leaves first (seen
               once: never predicted; overdue: as far ahead as it is late),
               among 64 sampled

and one row that no online order can match: `dead-oracle`, LRU in both
levels except that a block that is never requested again leaves first
(it knows the future only for that).  The MIN bound itself is the
simulator's (`fairkv bench --min-bound`), not computed here.

  scripts/tier_ceiling.py TRACE DEVICE_TOKENS HOST_X [HOST_X ...]

Standard library only; a run of the shared trace takes a few minutes.
"""
import collections
import heapq
import json
import random
import sys

BLOCK = 512


def load(path):
    reqs = []
    with open(path) as f:
        for ln, line in enumerate(f, 1):
            line = line.strip()
            if not line:
                continue
            try:
                r = json.loads(line)
                h, n = r["hash_ids"], int(r["input_length"])
            except (ValueError, KeyError, TypeError) as e:
                sys.exit(f"{path}:{ln}: not a Mooncake request ({e})")
            keys, k = [], None
            for b in h:
                k = hash((k, b))
                keys.append(k)
            lens = [max(0, min(BLOCK, n - BLOCK * i)) for i in range(len(h))]
            reqs.append((keys, lens))
    return reqs


def replay(reqs, cache):
    hit = total = 0
    for keys, lens in reqs:
        j = 0
        while j < len(keys) and cache.has(keys[j]):
            hit += lens[j]
            j += 1
        for k, n in zip(keys, lens):
            cache.access(k, n)
        total += sum(lens)
    return hit / total


class Lru:
    """One level in recency order; put() returns what it pushed out."""

    def __init__(self, cap, first=None):
        self.cap, self.used = cap, 0
        self.a = collections.OrderedDict()  # leaves first when `first` says so
        self.b = collections.OrderedDict()
        self.first = first

    def has(self, k):
        return k in self.a or k in self.b

    def take(self, k):
        n = self.a.pop(k) if k in self.a else self.b.pop(k)
        self.used -= n

    def put(self, k, n):
        (self.a if self.first and self.first(k) else self.b)[k] = n
        self.used += n
        out = []
        while self.used > self.cap:
            x, m = (self.a if self.a else self.b).popitem(last=False)
            self.used -= m
            out.append((x, m))
        return out


class S3Fifo:
    def __init__(self, cap):
        self.cap, self.small, self.main = cap, collections.OrderedDict(), collections.OrderedDict()
        self.ghost, self.us, self.um, self.freq, self.ret = collections.OrderedDict(), 0, 0, {}, set()

    def has(self, k):
        return k in self.small or k in self.main

    def take(self, k):  # a read: the block goes up; its next return counts
        if k in self.small:
            self.us -= self.small.pop(k)
        else:
            self.um -= self.main.pop(k)
        del self.freq[k]
        self.ret.add(k)

    def put(self, k, n):
        if k in self.ghost or k in self.ret:
            self.ghost.pop(k, None)
            self.ret.discard(k)
            self.main[k] = n
            self.um += n
            self.freq[k] = 0
        else:
            self.small[k] = n
            self.us += n
            self.freq[k] = 0
        while self.us + self.um > self.cap:
            if self.small and (self.us > self.cap / 10 or not self.main):
                x, m = self.small.popitem(last=False)
                self.us -= m
                if self.freq[x]:
                    self.main[x] = m
                    self.um += m
                    self.freq[x] = 0
                else:
                    del self.freq[x]
                    self.ghost[x] = 1
                    while len(self.ghost) > len(self.main) + 1:
                        self.ghost.popitem(last=False)
            else:
                x, m = self.main.popitem(last=False)
                if self.freq[x]:
                    self.freq[x] -= 1
                    self.main[x] = m
                else:
                    self.um -= m
                    del self.freq[x]
        return []


class Lru2:
    def __init__(self, cap, hist):
        self.cap, self.used, self.c, self.h, self.hist = cap, 0, {}, [], hist

    def rank(self, k):
        h = self.hist[k]
        return (h[-2] if len(h) > 1 else -1, h[-1])

    def has(self, k):
        return k in self.c

    def take(self, k):
        self.used -= self.c.pop(k)

    def put(self, k, n):
        self.c[k] = n
        self.used += n
        heapq.heappush(self.h, (self.rank(k), k))
        while self.used > self.cap:
            r, x = heapq.heappop(self.h)
            if x in self.c and self.rank(x) == r:
                self.used -= self.c.pop(x)
        return []


class Sampled:
    """Evicts the worst of 64 sampled blocks by rank(k) (the largest)."""

    def __init__(self, cap, rank):
        self.cap, self.used, self.keys, self.at, self.n = cap, 0, [], {}, {}
        self.rank, self.rng = rank, random.Random(1)

    def has(self, k):
        return k in self.at

    def take(self, k):
        i, last = self.at.pop(k), self.keys.pop()
        if last != k:
            self.keys[i] = last
            self.at[last] = i
        self.used -= self.n.pop(k)

    def put(self, k, n):
        self.at[k] = len(self.keys)
        self.keys.append(k)
        self.n[k] = n
        self.used += n
        while self.used > self.cap:
            self.take(max((self.keys[self.rng.randrange(len(self.keys))] for _ in range(64)), key=self.rank))
        return []


def hyperbolic(t):
    return lambda k: -t.seen[k] / (t.t - t.first[k] + 1)


def next_gap(t):
    def rank(k):
        h = t.hist[k]
        nxt = h[-1] + (h[-1] - h[-2]) if len(h) > 1 else float("inf")
        return nxt if nxt >= t.t else t.t + (t.t - h[-1])

    return rank


class Tiers:
    """Device LRU over a host of the given order, exclusive.  `first`
    (a key -> bool) makes both levels push those keys out first."""

    def __init__(self, dev, host, first=None):
        self.seen, self.t, self.hist, self.first = collections.Counter(), 0, {}, {}
        self.dev = Lru(dev, first)
        self.host = host(self)

    def has(self, k):
        return self.dev.has(k) or self.host.has(k)

    def access(self, k, n):
        self.seen[k] += 1
        self.t += 1
        self.first.setdefault(k, self.t)
        h = self.hist.setdefault(k, [])
        h.append(self.t)
        del h[:-2]
        if self.dev.has(k):
            self.dev.take(k)
        elif self.host.has(k):
            self.host.take(k)
        for x, m in self.dev.put(k, n):
            self.host.put(x, m)


class DeadOracle(Tiers):
    """LRU in both levels, but a block at its last request leaves first."""

    def __init__(self, dev, host_cap, reqs):
        seq = [k for keys, _ in reqs for k in keys]
        later, self.last = set(), [False] * len(seq)
        for i in range(len(seq) - 1, -1, -1):
            self.last[i] = seq[i] not in later
            later.add(seq[i])
        self.dead, self.i = set(), 0
        super().__init__(dev, lambda t: Lru(host_cap, lambda k: k in self.dead), lambda k: k in self.dead)

    def access(self, k, n):
        if self.last[self.i]:
            self.dead.add(k)
        self.i += 1
        super().access(k, n)


def reuse_gaps(reqs, cap):
    """Of the blocks an unlimited cache finds, the fraction last read more
    than `back` requests earlier, `back` being how many requests' tokens
    (of the trace's mean) fit in cap tokens."""
    last, found, far = {}, 0, 0
    back = cap / (sum(sum(n) for _, n in reqs) / len(reqs))
    for i, (keys, _) in enumerate(reqs):
        for k in keys:
            if k not in last:
                break
            found += 1
            far += i - last[k] > back
        for k in keys:
            last[k] = i
    return back, far / found


def main():
    if len(sys.argv) < 4:
        sys.exit(__doc__.split("\n\n")[-2].strip())
    try:
        dev, hxs = int(sys.argv[2]), [float(x) for x in sys.argv[3:]]
    except ValueError as e:
        sys.exit(f"tier_ceiling: DEVICE_TOKENS is an integer and HOST_X numbers ({e})")
    if dev <= 0 or any(x < 0 for x in hxs):
        sys.exit("tier_ceiling: DEVICE_TOKENS > 0 and HOST_X >= 0")
    reqs = load(sys.argv[1])
    for hx in hxs:
        cap = int(hx * dev)
        back, far = reuse_gaps(reqs, dev + cap)
        print(f"host {hx:g}x: device + host hold {back:.0f} requests' tokens; of the blocks an unlimited cache "
              f"finds, {100 * far:.1f}% were last read further back", flush=True)
        orders = {
            "lru": lambda t: Lru(cap),
            "s3fifo": lambda t: S3Fifo(cap),
            "seen-first": lambda t: Lru(cap, lambda k: t.seen[k] < 2),
            "lru-2": lambda t: Lru2(cap, t.hist),
            "hyperbolic": lambda t: Sampled(cap, hyperbolic(t)),
            "next-gap": lambda t: Sampled(cap, next_gap(t)),
        }
        for name, host in orders.items():
            rate = replay(reqs, Tiers(dev, host))
            print(f"host {hx:g}x  {name:<11} {100 * rate:6.2f}%", flush=True)
        rate = replay(reqs, DeadOracle(dev, cap, reqs))
        print(f"host {hx:g}x  {'dead-oracle':<11} {100 * rate:6.2f}%", flush=True)


if __name__ == "__main__":
    main()
