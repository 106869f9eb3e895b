"""The Cache/Sequence API: config errors, a request's life against the C
test of the same sequence (tests/test_prefix.c, token_mode), fork, pins,
tenants, metrics."""
import json

import numpy as np
import pytest

import fairkv


def small(**kw):
    cfg = dict(n_layers=1, n_kv_heads=1, head_dim=2, page_tokens=4, capacity_pages=128)
    cfg.update(kw)
    return fairkv.Cache(virtual_clock=True, **cfg)


# ---------------------------------------------------------------- config errors

@pytest.mark.parametrize("kw, field", [
    (dict(head_dim=0), "head_dim"),           # the library's check
    (dict(page_tokens=0), "page_tokens"),
    (dict(policy="nope"), "nope"),            # the library: no such policy
    (dict(chunk_tokens=6, page_tokens=4), "chunk_tokens"),
    (dict(alpha=float("nan")), "alpha"),      # Python-side checks
    (dict(n_layers=-1), "n_layers"),
    (dict(n_layers=2**32), "n_layers"),
    (dict(n_layers="2"), "n_layers"),
    (dict(dtype="int3"), "dtype"),
    (dict(storage="gpu"), "storage"),
    (dict(quotas=2), "quotas"),
    (dict(prefix_cache="yes"), "prefix_cache"),
    (dict(bogus_field=1), "bogus_field"),
])
def test_config_error_names_field(kw, field):
    with pytest.raises(fairkv.Error) as ei:
        fairkv.Cache(**kw)
    assert field in str(ei.value), str(ei.value)
    assert ei.value.status != 0
    assert ei.value.status_name in ("EINVAL", "ENOENT", "EUNSUPPORTED")


def test_library_status_is_carried():
    with pytest.raises(fairkv.Error) as ei:
        fairkv.Cache(policy="nope")
    assert ei.value.status_name == "EINVAL" and "policy" in ei.value.message
    with pytest.raises(fairkv.Error) as ei:
        fairkv.Cache(head_dim=0)
    assert ei.value.status_name == "EINVAL"


def test_every_field_round_trips():
    d = fairkv.config_defaults()
    assert d["page_tokens"] == 16 and d["policy"] == "flru" and d["dtype"] == "f16"
    changed = dict(n_layers=2, n_kv_heads=2, head_dim=8, dtype="f32", page_tokens=8, capacity_pages=64,
                   storage="cpu", chunk_tokens=16, dynamic_chunking=True, chunk_min_tokens=16,
                   chunk_max_tokens=64, policy="lru", alpha=0.5, beta=0.5, age_unit_ns=10, quotas="tenant",
                   temperature=3.0, tenant_labels=4, min_chunk_retention_ns=5, free_tail_first=True,
                   quant_mode="under-pressure", quant_dtype="int8", quant_hot_tokens=32, quant_pressure=0.8,
                   quant_warm_tokens=64, host_capacity_bytes=1 << 20, host_demote=True, tier_admission="seen",
                   tier_admission_threshold=3, tier_admission_window=1000, host_policy="s3fifo", prefix_cache=True,
                   block_tokens=64,
                   class_short_max=100, class_medium_max=400, device_label="dev1", thread_safe=False)
    assert set(changed) | {"capacity_bytes"} == set(d)
    with fairkv.Cache(**changed) as c:
        for k, v in changed.items():
            want = "under_pressure" if k == "quant_mode" else v
            assert c.config[k] == want, k
        assert c.info()["n_pages"] == 64


# ---------------------------------------------------------------- a request's life

def test_request_life_matches_c_test():
    """tests/test_prefix.c token_mode, call for call, with its assertions."""
    c = small(chunk_tokens=8, chunk_min_tokens=8, chunk_max_tokens=32, block_tokens=8, prefix_cache=True)
    a = list(range(1000, 1040))
    b = list(a)
    b[33] = 7
    sa = c.sequence(request_id=1)
    assert sa.match(a, 39) == 0
    sa.append(a)
    sb = c.sequence(request_id=2)
    assert sb.match(b, 39) == 32
    ca, cb = sa.chunks(), sb.chunks()
    assert len(cb) == 4
    for x, y in zip(ca, cb):
        assert x["pages"] == y["pages"] and x["refs"] == 2 and x["access_count"] == 2
    sb.append(b[32:])
    cb = sb.chunks()
    assert len(cb) == 5 and cb[4]["pages"] != sa.chunks()[4]["pages"]
    cn = c.counters()
    assert cn["prefix_query_tokens"] == 80 and cn["prefix_hit_tokens"] == 32
    sc = c.sequence(request_id=3)
    assert sc.match(a[4:], 36) == 0
    sc.free()
    sa.free()
    sb.free()
    info = c.info()
    assert info["n_chunks"] == 6 and info["free_pages"] == 128 - 12
    sd = c.sequence(request_id=4)
    assert sd.match(b, 40) == 40
    se = c.sequence(request_id=5)
    assert se.match(b, 39) == 36
    # the same counters through the JSON and Prometheus texts
    m = c.metrics()
    assert json.dumps(m)  # a plain dict
    text = c.prometheus()
    assert "# TYPE" in text and "kv_cache" in text
    c.close()


def test_touch_counts_hits_then_misses():
    c = small(capacity_pages=16, chunk_tokens=8, prefix_cache=False)
    s = c.sequence()
    s.append(40)
    before = c.counters()
    assert s.touch() == 0
    after = c.counters()
    hit = sum(after["hit_tokens"].values()) - sum(before["hit_tokens"].values())
    assert hit == 40
    # pinned chunks are not evicted; unpinned ones are, and become missing
    with s.pin():
        with pytest.raises(fairkv.Error) as ei:
            c.evict(16)
        assert ei.value.status_name == "EFULL"
        assert s.touch() == 0 and s.missing() == []
    assert c.evict(16) == 10
    miss = s.touch()
    assert miss > 0 and sum(e - b for b, e in s.missing()) == miss
    assert sum(c.counters()["miss_tokens"].values()) == miss
    c.close()


def test_fork_copies_one_page_on_write():
    c = small(storage="cpu", dtype="f32", chunk_tokens=8)
    a = c.sequence()
    sl = a.append(10)
    k, _ = c.kv(0)
    k[sl[:, 0], sl[:, 1], 0, 0] = np.arange(10, dtype=np.float32)
    free0 = c.info()["free_pages"]
    b = a.fork()
    assert len(b) == 10 and c.info()["free_pages"] == free0
    bs = b.append(1)
    assert c.info()["free_pages"] == free0 - 1 and c.counters()["cow_copies"] == 1
    # the library copied the page: Python reads tokens 8, 9 in the copy
    assert bs[0, 0] != sl[9, 0] and bs[0, 1] == 2
    assert list(k[bs[0, 0], :2, 0, 0]) == [8.0, 9.0]
    c.close()


def test_tenants_and_weights():
    c = small(quotas="tenant", capacity_pages=64)
    c.set_tenant_weight(1, 3.0)
    s1 = c.sequence(tenant=1, salt=9)
    s2 = c.sequence(tenant=2)
    s1.append(list(range(32)))
    s2.append(list(range(16)))
    t1, t2 = c.tenant_info(1), c.tenant_info(2)
    assert t1["weight"] == 3.0 and t1["pages"] == 8 and t2["pages"] == 4 and s1.tenant == 1
    assert t1["seqs"] == 1 and set(t1["reclaimed_pages"]) >= {"evict", "offload", "idle"}
    with pytest.raises(fairkv.Error) as ei:
        c.set_tenant_weight(1, -1.0)
    assert ei.value.status_name == "EINVAL"
    with pytest.raises(fairkv.Error):
        c.set_tenant_weight(1, "heavy")
    with pytest.raises(fairkv.Error) as ei:
        c.tenant_info(77)
    assert ei.value.status_name == "ENOENT"
    # salts separate prefix namespaces: another salt matches nothing
    s1.free()
    s3 = c.sequence(tenant=1, salt=8)
    assert s3.match(list(range(32))) == 0
    s4 = c.sequence(tenant=1, salt=9)
    assert s4.match(list(range(32))) == 28
    c.close()


def test_bad_arguments_raise():
    c = small()
    s = c.sequence()
    with pytest.raises(fairkv.Error):
        s.append([[1, 2]])
    with pytest.raises(fairkv.Error) as ei:  # would wrap around in int32
        s.append([1, 2**40])
    assert "int32" in str(ei.value)
    with pytest.raises(fairkv.Error):
        s.append(np.array([-(2**31) - 1]))
    with pytest.raises(fairkv.Error) as ei:
        s.append([1.5, 2.0])
    assert "integers" in str(ei.value)
    with pytest.raises(fairkv.Error):
        s.append([2**70])
    assert len(s) == 0  # nothing appended by a refused call
    with pytest.raises(fairkv.Error):
        c.sequence(tenant=-1)
    with pytest.raises(fairkv.Error) as ei:
        c.sequence(request_id=s.id)  # ids are unique among open sequences
    assert ei.value.status_name in ("EINVAL", "ESTATE")
    with pytest.raises(fairkv.Error):
        s.reclaim("shrink", 1)
    with pytest.raises(fairkv.Error) as ei:
        s.unpin()  # never pinned
    with pytest.raises(fairkv.Error) as ei:
        c.kv(0)  # phantom storage
    assert ei.value.status_name == "EUNSUPPORTED"
    c.close()


def test_full_cache_raises_efull_and_keeps_state():
    c = small(capacity_pages=4, chunk_tokens=4, prefix_cache=False)
    s = c.sequence()
    with s.pin():
        s.append(16)
        with pytest.raises(fairkv.Error) as ei:
            s.append(1)
        assert ei.value.status_name == "EFULL" and len(s) == 16
    c.close()


# ---------------------------------------------------------------- lifetimes

def test_lifetime_close_before_sequence_raises():
    c = small()
    s = c.sequence()
    s.append(8)
    c.close()
    for call in (lambda: s.append(1), lambda: len(s), s.touch, s.pin, lambda: s.match([1, 2]), s.chunks,
                 c.info, c.metrics, lambda: c.sequence()):
        with pytest.raises(fairkv.Error) as ei:
            call()
        assert ei.value.status_name == "ESTATE" and "closed" in str(ei.value)
    s.free()   # nothing to free any more: no crash, no double free
    s = None   # and its collection after close frees nothing either
    c.close()  # idempotent


def test_lifetime_with_blocks_and_free():
    with small() as c:
        with c.sequence() as s:
            s.append(4)
        with pytest.raises(fairkv.Error) as ei:
            s.append(1)
        assert "freed" in str(ei.value)
        s2 = c.sequence()
        p = s2.pin()
    with pytest.raises(fairkv.Error):
        p.release()  # the cache is gone: a clear error, not a crash
    assert c.closed


def test_lifetime_views_outlive_close():
    c = small(storage="cpu", dtype="f32")
    s = c.sequence()
    sl = s.append(5)
    k, v = c.kv(0)
    k[sl[:, 0], sl[:, 1], 0, 0] = 42.0
    view = k[sl[0, 0]]
    c.close()
    # the library's memory lives as long as a view does
    assert float(view[sl[0, 1], 0, 0]) == 42.0
    view[0, 0, 1] = 1.0
    del k, v, view


def test_lifetime_gc_of_unclosed_objects():
    for _ in range(50):
        c = small(storage="cpu", dtype="f32")
        s = c.sequence()
        s.append(4)
        k, _v = c.kv(0)
        del c  # the sequence and the view still refer to it
        s.touch()
        k[0, 0, 0, 0] = 1.0
        del s, k, _v


def test_threads_share_a_cache():
    """cffi releases the GIL in every call: four threads append, touch and
    free on one cache (the library's lock), views die in any thread."""
    import threading
    c = small(capacity_pages=4096, storage="cpu", dtype="f32", prefix_cache=False)
    errors = []

    def work(t):
        try:
            for i in range(200):
                s = c.sequence(request_id=1 + t * 1000 + i)
                s.append(12)
                k, _ = c.kv(0)
                del k
                s.touch()
                s.free()
        except Exception as e:  # pragma: no cover - reported below
            errors.append(e)

    th = [threading.Thread(target=work, args=(t,)) for t in range(4)]
    for x in th:
        x.start()
    for x in th:
        x.join()
    assert not errors
    assert sum(c.counters()["hit_tokens"].values()) == 4 * 200 * 12
    c.close()


def test_from_env(monkeypatch):
    monkeypatch.setenv("FAIRKV_PAGE_TOKENS", "8")
    monkeypatch.setenv("FAIRKV_POLICY", "lru")
    with fairkv.Cache(from_env=True, capacity_pages=16, chunk_tokens=8) as c:
        assert c.config["page_tokens"] == 8 and c.config["policy"] == "lru"
    with fairkv.Cache(from_env=True, capacity_pages=16, page_tokens=4) as c:  # keywords win
        assert c.config["page_tokens"] == 4
    with fairkv.Cache(capacity_pages=16) as c:  # not read unless asked
        assert c.config["page_tokens"] == 16
    monkeypatch.setenv("FAIRKV_PAGE_TOKENS", "eight")
    with pytest.raises(fairkv.Error) as ei:
        fairkv.Cache(from_env=True)
    assert "FAIRKV_PAGE_TOKENS" in str(ei.value)



def test_eval_settings_reach_the_cache(monkeypatch):
    """block_tokens and the class limits go to fkv_eval_config (fairkv_eval.h):
    they change what the cache does, a bad value names the field, and
    from_env reads their FAIRKV_ variables."""
    with small(class_short_max=10, class_medium_max=20) as c:
        got = [c.sequence(expected_tokens=n).request_class for n in (9, 10, 20, 21)]
        assert got == ["short", "medium", "medium", "long"]
    with small() as c:  # the defaults: 128 / 512
        assert [c.sequence(expected_tokens=n).request_class for n in (127, 128, 513)] == ["short", "medium", "long"]
    with pytest.raises(fairkv.Error) as ei:
        small(block_tokens=6)  # not a multiple of page_tokens=4
    assert "block_tokens=6" in str(ei.value)
    with pytest.raises(fairkv.Error) as ei:
        small(class_short_max=600)
    assert "class_short_max=600" in str(ei.value)
    # hash-id mode on 8-token blocks: the second request finds the first's two blocks
    with small(block_tokens=8, chunk_tokens=8, prefix_cache=True) as c:
        a = c.sequence(block_ids=[5, 6])
        assert a.match(None) == 0
        a.append(16)
        a.free()
        b = c.sequence(block_ids=[5, 7])
        assert b.match(None) == 8  # the first block only: the second id differs
    monkeypatch.setenv("FAIRKV_CLASS_SHORT_MAX", "3")
    with small(from_env=True) as c:
        assert c.config["class_short_max"] == 3
        assert c.sequence(expected_tokens=3).request_class == "medium"
    monkeypatch.setenv("FAIRKV_BLOCK_TOKENS", "x")
    with pytest.raises(fairkv.Error) as ei:
        small(from_env=True)
    assert "FAIRKV_BLOCK_TOKENS" in str(ei.value)

def test_fetch_by_source_and_count_preempt():
    # four 8-token chunks; the last stays hot.  The first goes to the host
    # tier, the second is evicted: fetch brings back each from its source
    c = small(capacity_pages=32, chunk_tokens=8, quant_hot_tokens=8, host_capacity_bytes=1 << 20,
              storage="cpu", dtype="f32", quotas="off")
    s = c.sequence()
    s.append(list(range(32)))
    s.pin()
    assert s.reclaim("offload", 2) == 2 and s.reclaim("evict", 2) == 2
    assert s.missing() == [(0, 16)]
    got = s.fetch(sources=("recompute",))
    assert got["recompute_tokens"] == 8 and got["host_tokens"] == 0 and len(got["slots"]) == 8
    assert s.missing() == [(0, 8)]  # the host tier's chunk is left for its source
    got = s.fetch()
    assert got["host_tokens"] == 8 and got["host_bytes"] > 0 and got["recompute_tokens"] == 0
    assert s.missing() == []
    with pytest.raises(fairkv.Error):
        s.fetch(sources=("remote",))
    before = c.tenant_info(0)["reclaimed_pages"]["preempt"]
    free0 = c.info()["free_pages"]
    assert s.count_preempt() == 8
    assert c.tenant_info(0)["reclaimed_pages"]["preempt"] == before + 8 and c.info()["free_pages"] == free0
    s.unpin()
    c.close()
