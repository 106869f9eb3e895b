"""fairkv.vllm.OffloadingManager with a small loop in the engine's part
(no vLLM is installed here): requests' blocks are stored with their K/V,
pushed down to the host tier by later requests, found again, loaded back
with their K/V intact."""
import numpy as np
import pytest

import fairkv
from fairkv.vllm import OffloadingManager

B = 4  # tokens per block
D = 8


def block_kv(h):
    """The K/V an engine would hold for block h: a function of h alone."""
    rng = np.random.default_rng(h if isinstance(h, int) else list(h))
    return rng.standard_normal((B, 1, D)).astype(np.float32)


def engine_store(m, hashes):
    out = m.prepare_store(hashes)
    assert out is not None
    k, _ = m.cache.kv(0)
    for h, page in zip(out.store_spec.block_hashes, out.store_spec.pages):
        k[page] = block_kv(h)  # the worker's copy into the store
    m.complete_store(out.block_hashes_to_store)
    return out


def engine_load(m, hashes):
    spec = m.prepare_load(hashes)
    k, _ = m.cache.kv(0)
    for h, page in zip(spec.block_hashes, spec.pages):
        assert np.array_equal(k[page], block_kv(h)), f"block {h}: K/V changed in the store"
    m.complete_load(hashes)


def make(host=True):
    kw = dict(n_layers=1, n_kv_heads=1, head_dim=D, dtype="f32", capacity_pages=8, policy="lru")
    if host:
        kw["host_capacity_bytes"] = 64 * B * D * 4 * 2
    return OffloadingManager(B, **kw)


def test_engine_loop_over_host_tier():
    m = make()
    reqs = [[1000 * r + i for i in range(4)] for r in range(6)]  # 6 requests of 4 blocks; 8 pages
    for r in reqs:
        assert m.lookup(r) == 0
        engine_store(m, r)
        assert m.lookup(r) == 4
    # 24 blocks were stored in 8 pages: the rest went down to the host tier,
    # and every one is still found and loads with its K/V
    page_bytes = m.cache.info()["page_bytes"]
    assert m.cache.tenant_info(0)["host_bytes"] >= 16 * page_bytes
    for r in reqs:
        assert m.lookup(r) == 4
        engine_load(m, r)
    # the early requests' blocks came back from the host tier, K/V intact
    assert m.stats["loaded_blocks"] == 24 and m.stats["promoted_blocks"] >= 16
    assert m.stats["promoted_bytes"] >= 16 * page_bytes
    # a prefix hit ends at the first block not stored
    assert m.lookup(reqs[0][:2] + [999999] + reqs[0][3:]) == 2
    ev = list(m.take_events())
    assert sum(len(e.block_hashes) for e in ev if not e.removed) == 24
    assert all(e.medium == "fairkv" and e.block_size == B for e in ev)
    assert list(m.take_events()) == []
    m.close()


def test_without_host_tier_blocks_are_evicted_and_reported():
    m = make(host=False)
    reqs = [[1000 * r + i for i in range(4)] for r in range(4)]
    evicted = []
    for r in reqs:
        out = engine_store(m, r)
        evicted += out.block_hashes_evicted
    # 16 blocks into 8 pages: 8 evicted, and those are exactly the ones lookup misses
    assert len(evicted) == 8
    assert all(m.lookup([h]) == 0 for h in evicted)
    kept = [h for r in reqs for h in r if h not in evicted]
    assert all(m.lookup([h]) == 1 for h in kept)
    assert any(e.removed and e.block_hashes for e in m.take_events())
    m.close()


def test_pins_protect_loading_and_storing_blocks():
    m = make(host=False)
    a = [1, 2, 3, 4]
    engine_store(m, a)
    spec = m.prepare_load(a)  # pinned while the worker reads
    pending = m.prepare_store([10, 11, 12, 13])
    assert pending is not None
    assert m.lookup([10]) == 0  # not loadable before complete_store
    # the store is full of pinned blocks: nothing more fits
    assert m.prepare_store([20]) is None
    k, _ = m.cache.kv(0)
    for h, p in zip(spec.block_hashes, spec.pages):
        assert np.array_equal(k[p], block_kv(h))
    m.complete_load(a)
    m.complete_store([10, 11, 12, 13], success=False)  # a failed store leaves nothing
    assert m.lookup([10]) == 0
    assert m.prepare_store([20]) is not None
    with pytest.raises(fairkv.Error):
        m.complete_load(a)  # not being loaded any more
    with pytest.raises(fairkv.Error):
        m.prepare_load([424242])  # never stored
    m.close()


def test_touch_changes_the_lru_victim():
    m = make(host=False)
    engine_store(m, [1, 2, 3, 4])
    engine_store(m, [5, 6, 7, 8])
    m.touch([1, 2, 3, 4])  # now the older blocks are the recent ones
    out = engine_store(m, [9, 10, 11, 12])
    assert sorted(out.block_hashes_evicted) == [5, 6, 7, 8]
    assert m.lookup([1, 2, 3, 4]) == 4
    m.close()


def test_bytes_hashes():
    m = make()
    hs = [b"\x01" * 32, b"\x02" * 32]
    engine_store(m, hs)
    assert m.lookup(hs) == 2
    engine_load(m, hs)
    m.close()


# ---------------------------------------------------------------- the Redis tier

@pytest.fixture
def redis_url(tmp_path):
    import shutil
    import socket
    import subprocess
    import time
    redis = pytest.importorskip("redis", reason="no redis module (Debian: python3-redis)")
    exe = shutil.which("redis-server")
    if exe is None:
        pytest.skip("no redis-server (Debian: redis-server)")
    with socket.socket() as so:
        so.bind(("127.0.0.1", 0))
        port = so.getsockname()[1]
    proc = subprocess.Popen([exe, "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
                             "--dir", str(tmp_path)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    url = f"redis://127.0.0.1:{port}/0"
    try:
        for _ in range(200):
            try:
                redis.Redis.from_url(url).ping()
                break
            except redis.ConnectionError:
                time.sleep(0.02)
        yield url
    finally:
        proc.kill()
        proc.wait()


def test_engine_loop_over_redis_tier(redis_url):
    m = OffloadingManager(B, n_layers=2, n_kv_heads=1, head_dim=D, dtype="f32", capacity_pages=8, policy="lru",
                          redis_url=redis_url)
    reqs = [[1000 * r + i for i in range(4)] for r in range(6)]
    for r in reqs:
        engine_store(m, r)
    assert m.stats["remote_stored_blocks"] == 24
    # 24 blocks, 8 pages, no host tier: 16 live in Redis alone, and none is
    # reported evicted (the store still has them)
    for r in reqs:
        assert m.lookup(r) == 4
        engine_load(m, r)
    assert m.stats["remote_loaded_blocks"] >= 16
    assert not any(e.removed for e in m.take_events())
    # every layer's K/V went to Redis and came back: layer 1's V holds what
    # the engine wrote there
    for r in reqs:
        out = m.prepare_store([h + 500 for h in r])
        _, v1 = m.cache.kv(1)
        for h, page in zip(out.store_spec.block_hashes, out.store_spec.pages):
            v1[page] = block_kv(h) + 1
        m.complete_store(out.block_hashes_to_store)
    spec = m.prepare_load([h + 500 for h in reqs[0]])
    _, v1 = m.cache.kv(1)
    for h, page in zip(spec.block_hashes, spec.pages):
        assert np.array_equal(v1[page], block_kv(h) + 1)
    m.complete_load(spec.block_hashes)
    assert m.stats["remote_loaded_blocks"] >= 20
    m.close()


def test_redis_values_are_checked(redis_url):
    import redis
    r = redis.Redis.from_url(redis_url)
    m = OffloadingManager(B, n_layers=1, n_kv_heads=1, head_dim=D, dtype="f32", capacity_pages=4, policy="lru",
                          redis_url=redis_url)
    engine_store(m, [1, 2, 3, 4])
    engine_store(m, [5, 6, 7, 8])  # blocks 1..4 now in Redis alone
    assert m.lookup([1, 2, 3, 4]) == 4
    keys = sorted(r.keys("fairkv:block:*"))
    assert len(keys) == 8
    key1 = m._rkey(1)
    good = r.get(key1)
    r.set(key1, good[:-4])  # truncated
    with pytest.raises(fairkv.Error) as ei:
        m.prepare_load([1])
    assert ei.value.status_name == "EPARSE" and "bytes" in str(ei.value) and key1 in str(ei.value)
    r.set(key1, good.replace(b"FKVBLK", b"XXXXXX", 1))  # same size, wrong header
    with pytest.raises(fairkv.Error) as ei:
        m.prepare_load([1])
    assert "header" in str(ei.value)
    r.set(key1, r.get(m._rkey(2)))  # another block's value under this key
    with pytest.raises(fairkv.Error) as ei:
        m.prepare_load([1])
    assert "header" in str(ei.value)
    # any single byte changed anywhere, or a value cut anywhere, is refused
    rng = np.random.default_rng(3)
    for _ in range(40):
        bad = bytearray(good)
        i = int(rng.integers(len(bad)))
        bad[i] ^= 1 << int(rng.integers(8))
        r.set(key1, bytes(bad) if rng.random() < 0.8 else good[:int(rng.integers(len(good)))])
        with pytest.raises(fairkv.Error) as ei:
            m.prepare_load([1])
        assert ei.value.status_name == "EPARSE", str(ei.value)
    # nothing half-loaded stayed behind: the bad block is still not in the cache's pages
    r.delete(key1)
    assert m.lookup([1]) == 0
    r.set(key1, good)
    engine_load(m, [1])
    m.close()


def test_redis_down_is_a_clear_error(redis_url):
    m = OffloadingManager(B, n_layers=1, n_kv_heads=1, head_dim=D, dtype="f32", capacity_pages=4, policy="lru",
                          redis_url=redis_url)
    engine_store(m, [1, 2, 3, 4])
    engine_store(m, [5, 6, 7, 8])
    import redis
    redis.Redis.from_url(redis_url).shutdown(nosave=True)
    assert m.lookup([1]) == 0  # an unreachable tier is a miss
    assert m.lookup([5, 6, 7, 8]) == 4  # the pages still hold these
    engine_store(m, [9])  # the write-through fails, the store does not
    assert m.stats["remote_store_errors"] == 1
    with pytest.raises(fairkv.Error):
        m._remote_get(1, 0)
    m.close()
