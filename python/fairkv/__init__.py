"""fairkv from Python: the KV cache, its K/V memory as numpy arrays, the
attention kernels, the serving simulator and a vLLM-shaped offloading
adapter (``fairkv.vllm``).

    import fairkv
    with fairkv.Cache(n_layers=1, n_kv_heads=1, head_dim=4, dtype="f32",
                      storage="cpu", capacity_pages=64) as cache:
        with cache.sequence(tenant=1) as seq:
            slots = seq.append([1, 2, 3])
            k, v = cache.kv(0)
            k[slots[:, 0], slots[:, 1]] = 1.0
"""
from ._core import Cache, Error, Sequence, config_defaults, policy_names
from ._bench import bench, frontier, table, fairkv_binary
from ._native import lib as _lib

__version__ = f"{_lib.FKV_VERSION_MAJOR}.{_lib.FKV_VERSION_MINOR}.{_lib.FKV_VERSION_PATCH}"

__all__ = ["Cache", "Sequence", "Error", "config_defaults", "policy_names", "bench", "frontier", "table",
           "fairkv_binary", "__version__"]
