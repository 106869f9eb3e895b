"""K/V as numpy views of the library's memory, and the attention kernels
against a numpy reference (the C tests' bound: normalized MSE <= 1e-10 for
fp32 K/V, <= 1e-6 for fp16, reference in fp64 on the unrounded data)."""
import numpy as np
import pytest

import fairkv

BOUND = {"f32": 1e-10, "f16": 1e-6}


def nmse(ref, got):
    ref = np.asarray(ref, dtype=np.float64)
    e = float(np.sum((ref - got) ** 2))
    z = float(np.sum(ref ** 2))
    return e / z if z > 0 else e


def ref_attention(q, k, v, scale, causal_pos0=None):
    """q [n_q, H, D]; k, v [T, KVH, D] (fp64); query i attends to tokens
    <= causal_pos0 + i (all if None)."""
    n_q, H, D = q.shape
    T, KVH, _ = k.shape
    g = H // KVH
    out = np.zeros((n_q, H, D))
    for i in range(n_q):
        last = T if causal_pos0 is None else causal_pos0 + i + 1
        for h in range(H):
            s = (k[:last, h // g, :] @ q[i, h]) * scale
            p = np.exp(s - s.max())
            p /= p.sum()
            out[i, h] = p @ v[:last, h // g, :]
    return out


def test_views_alias_library_memory_token7():
    """examples/attention.c from Python: write K/V through numpy, read
    through the C kernel; only token 7's key meets the query."""
    D, N = 4, 40
    with fairkv.Cache(n_layers=1, n_kv_heads=1, head_dim=D, dtype="f32", storage="cpu",
                      capacity_pages=16) as c:
        s = c.sequence()
        sl = s.append(np.arange(100, 100 + N))
        k, v = c.kv(0)
        assert k.shape == (16, 16, 1, D) and k.dtype == np.float32
        assert not k.flags.owndata
        k[sl[:, 0], sl[:, 1]] = 0.0
        k[sl[7, 0], sl[7, 1]] = 1.0
        i = np.arange(N, dtype=np.float32)
        v[sl[:, 0], sl[:, 1], 0] = np.stack([i, -i, 2 * i, np.ones(N, np.float32)], axis=1)
        out = c.attention_decode(0, [s], np.full((1, 1, D), 40.0, np.float32))
        assert np.allclose(out[0, 0], [7, -7, 14, 1], atol=0.02), out
        # and a change through the view changes what the kernel reads
        k[sl[7, 0], sl[7, 1]] = 0.0
        k[sl[9, 0], sl[9, 1]] = 1.0
        out = c.attention_decode(0, [s], np.full((1, 1, D), 40.0, np.float32))
        assert np.allclose(out[0, 0], [9, -9, 18, 1], atol=0.02), out
        # the same array is returned for a layer: one mapping, not copies
        k2, _ = c.kv(0)
        assert np.shares_memory(k, k2)


def fill(c, s, n, rng, layers):
    """Appends n tokens and writes random K/V for every layer; returns the
    unrounded values [layer] -> (k, v) of shape [n, KVH, D] in fp64."""
    cfg = c.config
    sl = s.append(n)
    vals = []
    for layer in range(layers):
        kk = rng.standard_normal((n, cfg["n_kv_heads"], cfg["head_dim"]))
        vv = rng.standard_normal((n, cfg["n_kv_heads"], cfg["head_dim"]))
        k, v = c.kv(layer)
        k[sl[:, 0], sl[:, 1]] = kk
        v[sl[:, 0], sl[:, 1]] = vv
        vals.append((kk, vv))
    return vals


@pytest.mark.parametrize("dtype", ["f32", "f16"])
@pytest.mark.parametrize("heads, kv_heads", [(4, 4), (8, 2)])
def test_decode_matches_numpy_reference(dtype, heads, kv_heads):
    rng = np.random.default_rng(7)
    D = 32
    with fairkv.Cache(n_layers=2, n_kv_heads=kv_heads, head_dim=D, dtype=dtype, storage="cpu",
                      capacity_pages=256, page_tokens=16, chunk_tokens=64, prefix_cache=False) as c:
        seqs, data = [], []
        for n in (1, 37, 130, 200):
            s = c.sequence()
            data.append(fill(c, s, n, rng, 2))
            seqs.append(s)
        for layer in range(2):
            q = rng.standard_normal((len(seqs), heads, D)).astype(np.float32)
            out = c.attention_decode(layer, seqs, q)
            for i in range(len(seqs)):
                kk, vv = data[i][layer]
                ref = ref_attention(q[i:i + 1].astype(np.float64), kk, vv, 1 / np.sqrt(D))
                e = nmse(ref, out[i:i + 1])
                assert e <= BOUND[dtype], (dtype, i, layer, e)


@pytest.mark.parametrize("dtype", ["f32", "f16"])
def test_prefill_matches_numpy_reference(dtype):
    rng = np.random.default_rng(11)
    D, H, KVH = 16, 4, 2
    with fairkv.Cache(n_layers=1, n_kv_heads=KVH, head_dim=D, dtype=dtype, storage="cpu",
                      capacity_pages=64, page_tokens=8, chunk_tokens=32, prefix_cache=False) as c:
        s = c.sequence()
        kk, vv = fill(c, s, 90, rng, 1)[0]
        q = rng.standard_normal((30, H, D)).astype(np.float32)  # the last 30 tokens, causal
        out = c.attention_prefill(0, s, q, q_pos0=60, scale=0.2)
        ref = ref_attention(q.astype(np.float64), kk, vv, 0.2, causal_pos0=60)
        assert nmse(ref, out) <= BOUND[dtype]
        # a wrong answer is caught: the reference without the causal mask differs
        assert nmse(ref_attention(q.astype(np.float64), kk, vv, 0.2), out) > 1e-3


def test_attention_bad_queries_raise():
    with fairkv.Cache(n_layers=1, n_kv_heads=2, head_dim=8, dtype="f32", storage="cpu",
                      capacity_pages=16) as c:
        s = c.sequence()
        s.append(4)
        with pytest.raises(fairkv.Error) as ei:
            c.attention_decode(0, [s], np.zeros((1, 3, 8), np.float32))  # 3 heads over 2 kv heads
        assert "n_heads" in str(ei.value)
        with pytest.raises(fairkv.Error):
            c.attention_decode(0, [s], np.zeros((2, 2, 8), np.float32))  # two queries, one sequence
        with pytest.raises(fairkv.Error):
            c.attention_decode(5, [s], np.zeros((1, 2, 8), np.float32))  # no layer 5
        with fairkv.Cache(n_layers=1, n_kv_heads=2, head_dim=8, dtype="f32", storage="cpu",
                          capacity_pages=16) as other:
            t = other.sequence()
            t.append(4)
            with pytest.raises(fairkv.Error) as ei:  # its pages are another cache's
                c.attention_decode(0, [s, t], np.zeros((2, 2, 8), np.float32))
            assert "not a sequence of this cache" in str(ei.value)
            with pytest.raises(fairkv.Error):
                c.attention_prefill(0, t, np.zeros((1, 2, 8), np.float32))
    with fairkv.Cache(n_layers=1, n_kv_heads=1, head_dim=8, capacity_pages=16) as c:
        s = c.sequence()
        s.append(4)
        with pytest.raises(fairkv.Error) as ei:
            c.attention_decode(0, [s], np.zeros((1, 1, 8), np.float32))
        assert ei.value.status_name == "EUNSUPPORTED"
