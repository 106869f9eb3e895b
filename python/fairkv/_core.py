"""The cache, its sequences, K/V views and the attention kernels.

Lifetimes: a Cache owns the library's fkv_cache; a Sequence owns an
fkv_seq and refers to its Cache.  ``Cache.close()`` (or leaving its
``with`` block) frees the library's cache and every sequence still open on
it; afterwards every call on the cache or one of its sequences raises
``fairkv.Error`` (status ``ESTATE``) instead of touching freed memory.  The
numpy K/V views returned by ``Cache.kv()`` hold the library's memory alive
on their own: when the cache is closed while a view still exists, the
library's cache is destroyed when the last view goes, never before.
"""
from __future__ import annotations

import json
import math
import threading
import weakref
from typing import Any, Dict, Iterable, List, Optional, Sequence as SeqT, Tuple

import numpy as np

from ._native import ffi, lib

__all__ = ["Error", "Cache", "Sequence", "config_defaults", "policy_names"]

_STATUS_NAMES = {
    lib.FKV_OK: "OK",
    lib.FKV_EINVAL: "EINVAL",
    lib.FKV_ENOMEM: "ENOMEM",
    lib.FKV_EFULL: "EFULL",
    lib.FKV_ENOENT: "ENOENT",
    lib.FKV_ESTATE: "ESTATE",
    lib.FKV_EIO: "EIO",
    lib.FKV_EPARSE: "EPARSE",
    lib.FKV_EUNSUPPORTED: "EUNSUPPORTED",
}


class Error(Exception):
    """An error of the library or of a call's arguments.

    ``status`` is the library's fkv_status code (an int; ``status_name`` its
    name, e.g. ``"EINVAL"``) and ``message`` the detail naming what is wrong
    (the field or argument, its value, the limit).
    """

    def __init__(self, status: int, message: str):
        self.status = int(status)
        self.status_name = _STATUS_NAMES.get(self.status, str(self.status))
        self.message = message
        super().__init__(f"{message} [{self.status_name}]")


def _raise(st: int, what: str = "") -> None:
    detail = ffi.string(lib.fkv_last_error()).decode("utf-8", "replace")
    if not detail:
        detail = ffi.string(lib.fkv_strerror(st)).decode()
    raise Error(st, f"{what}: {detail}" if what and not detail.startswith(what) else detail)


def _einval(msg: str) -> Error:
    return Error(lib.FKV_EINVAL, msg)


# ------------------------------------------------------------------ config

_U32 = (0, 2**32 - 1)
_U64 = (0, 2**64 - 1)
_I64 = (-(2**63), 2**63 - 1)
_DTYPES = {"f32": lib.FKV_F32, "f16": lib.FKV_F16}
_QDTYPES = {"int8": lib.FKV_INT8, "int4": lib.FKV_INT4}
_STORAGE = {"phantom": lib.FKV_STORAGE_PHANTOM, "cpu": lib.FKV_STORAGE_CPU}
_QUOTAS = {"off": lib.FKV_QUOTA_OFF, "request": lib.FKV_QUOTA_REQUEST, "tenant": lib.FKV_QUOTA_TENANT}
_QMODES = {"off": lib.FKV_QUANT_OFF, "always": lib.FKV_QUANT_ALWAYS, "under_pressure": lib.FKV_QUANT_UNDER_PRESSURE}
_TIER_ADMIT = {"off": lib.FKV_TIER_ADMIT_OFF, "tinylfu": lib.FKV_TIER_ADMIT_TINYLFU, "seen": lib.FKV_TIER_ADMIT_SEEN}
_HOST_POLICY = {"lru": lib.FKV_HOST_LRU, "s3fifo": lib.FKV_HOST_S3FIFO, "arc": lib.FKV_HOST_ARC}

# Every field of fkv_config a Python caller sets, with its kind: the one
# table that validation, defaults and the docs read.  (clock and next_use
# are callbacks: see Cache's virtual_clock; next_use is for simulators.)
# The names in _EVAL_FIELDS are fkv_eval_config's (fairkv_eval.h), set at
# creation through fkv_cache_create_eval; the keywords are the same.
_FIELDS: Dict[str, Tuple[str, Any]] = {
    "n_layers": ("int", _U32),
    "n_kv_heads": ("int", _U32),
    "head_dim": ("int", _U32),
    "dtype": ("enum", _DTYPES),
    "page_tokens": ("int", _U32),
    "capacity_bytes": ("int", _U64),
    "capacity_pages": ("int", _U32),
    "storage": ("enum", _STORAGE),
    "chunk_tokens": ("int", _U32),
    "dynamic_chunking": ("bool", None),
    "chunk_min_tokens": ("int", _U32),
    "chunk_max_tokens": ("int", _U32),
    "policy": ("str", None),
    "alpha": ("float", None),
    "beta": ("float", None),
    "age_unit_ns": ("int", _I64),
    "quotas": ("enum", _QUOTAS),
    "temperature": ("float", None),
    "tenant_labels": ("int", _U32),
    "min_chunk_retention_ns": ("int", _I64),
    "free_tail_first": ("bool", None),
    "quant_mode": ("enum", _QMODES),
    "quant_dtype": ("enum", _QDTYPES),
    "quant_hot_tokens": ("int", _U32),
    "quant_pressure": ("float", None),
    "quant_warm_tokens": ("int", _U32),
    "host_capacity_bytes": ("int", _U64),
    "host_demote": ("bool", None),
    "tier_admission": ("enum", _TIER_ADMIT),
    "tier_admission_threshold": ("int", _U32),
    "tier_admission_window": ("int", _U64),
    "host_policy": ("enum", _HOST_POLICY),
    "prefix_cache": ("bool", None),
    "block_tokens": ("int", _U32),
    "class_short_max": ("int", _U32),
    "class_medium_max": ("int", _U32),
    "device_label": ("str", None),
    "thread_safe": ("bool", None),
}


_EVAL_FIELDS = ("block_tokens", "class_short_max", "class_medium_max")


def _read_config(cfg: Any, ev: Any) -> Dict[str, Any]:
    out: Dict[str, Any] = {}
    for name, (kind, arg) in _FIELDS.items():
        raw = getattr(ev if name in _EVAL_FIELDS else cfg, name)
        if kind == "enum":
            out[name] = next((k for k, v in arg.items() if v == raw), int(raw))
        elif kind == "str":
            out[name] = ffi.string(raw).decode() if raw != ffi.NULL else None
        elif kind == "bool":
            out[name] = bool(raw)
        else:
            out[name] = raw
    return out


def config_defaults() -> Dict[str, Any]:
    """The library's defaults (fkv_config_default, fkv_eval_config_default)
    of every Cache keyword."""
    cfg = ffi.new("fkv_config *")
    lib.fkv_config_default(cfg)
    ev = ffi.new("fkv_eval_config *")
    lib.fkv_eval_config_default(ev)
    return _read_config(cfg, ev)


def policy_names() -> List[str]:
    """The registered eviction policies (values of ``policy``)."""
    names = lib.fkv_policy_names()
    out, i = [], 0
    while names[i] != ffi.NULL:
        out.append(ffi.string(names[i]).decode())
        i += 1
    return out


def _set_field(cfg: Any, ev: Any, name: str, value: Any, keep: List[Any]) -> None:
    if name not in _FIELDS:
        raise _einval(f"fairkv.Cache: unknown config field '{name}' (fields: {', '.join(_FIELDS)})")
    kind, arg = _FIELDS[name]
    if name in _EVAL_FIELDS:
        cfg = ev
    if kind == "int":
        if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
            raise _einval(f"fairkv.Cache: {name} must be an integer, got {value!r}")
        if not arg[0] <= int(value) <= arg[1]:
            raise _einval(f"fairkv.Cache: {name}={value} is outside [{arg[0]}, {arg[1]}]")
        setattr(cfg, name, int(value))
    elif kind == "float":
        if isinstance(value, bool) or not isinstance(value, (int, float, np.integer, np.floating)):
            raise _einval(f"fairkv.Cache: {name} must be a number, got {value!r}")
        if not math.isfinite(float(value)):
            raise _einval(f"fairkv.Cache: {name}={value} is not finite")
        setattr(cfg, name, float(value))
    elif kind == "bool":
        if value not in (True, False, 0, 1):
            raise _einval(f"fairkv.Cache: {name} must be a bool, got {value!r}")
        setattr(cfg, name, 1 if value else 0)
    elif kind == "enum":
        key = value.replace("-", "_") if isinstance(value, str) else value
        if key not in arg:
            raise _einval(f"fairkv.Cache: {name}={value!r} is not one of {', '.join(arg)}")
        setattr(cfg, name, arg[key])
    else:  # str
        if not isinstance(value, str) or "\0" in value:
            raise _einval(f"fairkv.Cache: {name} must be a string, got {value!r}")
        buf = ffi.new("char[]", value.encode())
        keep.append(buf)
        setattr(cfg, name, buf)


# ------------------------------------------------------------------ handles


class _Handle:
    """The library's cache pointer and who still needs it: the Cache object
    (one reference until close) and each live numpy K/V view."""

    __slots__ = ("ptr", "refs", "keep", "lock")

    def __init__(self, ptr: Any, keep: List[Any]):
        self.ptr = ptr
        self.refs = 1
        self.keep = keep  # strings and the clock the config points at
        self.lock = threading.Lock()  # a view may die in any thread

    def acquire(self) -> None:
        with self.lock:
            self.refs += 1

    def release(self) -> None:
        with self.lock:
            self.refs -= 1
            if self.refs != 0 or self.ptr is None:
                return
            ptr, self.ptr = self.ptr, None
        lib.fkv_cache_destroy(ptr)


_I32 = np.dtype(np.int32)
_T_I32 = ffi.typeof("int32_t[]")
_T_SLOT = ffi.typeof("fkv_slot[]")


def _tokens_arg(tokens: Any, what: str) -> Any:
    if type(tokens) is np.ndarray and tokens.dtype == np.int32 and tokens.ndim == 1 and tokens.flags.c_contiguous:
        return tokens
    arr = np.asarray(tokens)
    if arr.size and arr.dtype.kind not in "iu":
        raise _einval(f"{what}: token ids must be integers, got {arr.dtype} values")
    if arr.size and arr.dtype != _I32 and (int(arr.min()) < -(2**31) or int(arr.max()) >= 2**31):
        raise _einval(f"{what}: a token id is outside int32 ({int(arr.min())}..{int(arr.max())})")
    arr = np.ascontiguousarray(arr, dtype=np.int32)
    if arr.ndim != 1:
        raise _einval(f"{what}: tokens must be one-dimensional, got shape {arr.shape}")
    if arr.size >= 2**32:
        raise _einval(f"{what}: {arr.size} tokens is too many")
    return arr


def _u32(v: Any, what: str) -> int:
    if isinstance(v, bool) or not isinstance(v, (int, np.integer)) or not 0 <= int(v) < 2**32:
        raise _einval(f"{what} must be an integer in [0, 4294967295], got {v!r}")
    return int(v)


def _u64(v: Any, what: str) -> int:
    if isinstance(v, bool) or not isinstance(v, (int, np.integer)) or not 0 <= int(v) < 2**64:
        raise _einval(f"{what} must be an integer in [0, 2**64), got {v!r}")
    return int(v)


_RECLAIM = {
    "quantize8": lib.FKV_RECLAIM_QUANTIZE8,
    "quantize4": lib.FKV_RECLAIM_QUANTIZE4,
    "drop": lib.FKV_RECLAIM_DROP,
    "evict": lib.FKV_RECLAIM_EVICT,
    "preempt": lib.FKV_RECLAIM_PREEMPT,  # accounting only: count_preempt()
    "offload": lib.FKV_RECLAIM_OFFLOAD,
}

_FETCH = {"recompute": lib.FKV_FETCH_RECOMPUTE, "host": lib.FKV_FETCH_HOST}


# ------------------------------------------------------------------ cache


class Cache:
    """A KV cache (fkv_cache): ``fairkv.Cache(**config)``.

    Every field of the library's fkv_config is a keyword (see
    ``fairkv.config_defaults()`` for the names and defaults); enums are
    strings (``dtype="f32"``, ``storage="cpu"``, ``quotas="tenant"``,
    ``quant_mode="under_pressure"``).  A bad value raises ``fairkv.Error``
    naming the field.  ``virtual_clock=True`` replaces the monotonic clock by
    ``Cache.clock_ns``, which the caller sets (simulations, tests).
    ``from_env=True`` reads the FAIRKV_<FIELD> environment variables first
    (fkv_config_from_env), the keywords then override them.

    Use it as a context manager, or call ``close()``: both free the
    library's memory at once.
    """

    def __init__(self, *, virtual_clock: bool = False, from_env: bool = False, **config: Any):
        self._h: Optional[_Handle] = None
        cfg = ffi.new("fkv_config *")
        lib.fkv_config_default(cfg)
        ev = ffi.new("fkv_eval_config *")
        lib.fkv_eval_config_default(ev)
        keep: List[Any] = []
        if from_env:  # FAIRKV_<FIELD> variables first (docs/OPERATIONS.md), keywords over them
            err = ffi.new("char[512]")
            st = lib.fkv_config_from_env(cfg, err, 512)
            if not st:
                st = lib.fkv_eval_config_from_env(ev, err, 512)
            if st:
                raise Error(st, ffi.string(err).decode("utf-8", "replace"))
            for name, (kind, _arg) in _FIELDS.items():
                if kind == "str" and getattr(cfg, name) != ffi.NULL:  # a private copy: the environment may change
                    buf = ffi.new("char[]", ffi.string(getattr(cfg, name)))
                    keep.append(buf)
                    setattr(cfg, name, buf)
        for name, value in config.items():
            _set_field(cfg, ev, name, value, keep)
        self._clock = None
        if virtual_clock:
            self._clock = ffi.new("int64_t *", 0)
            keep.append(self._clock)
            cfg.clock.now_ns = ffi.addressof(lib, "fkv_virtual_clock_now")
            cfg.clock.ctx = self._clock
        out = ffi.new("fkv_cache **")
        err = ffi.new("char[512]")
        st = lib.fkv_cache_create_eval(cfg, ev, out, err, 512)
        if st != lib.FKV_OK:
            raise Error(st, ffi.string(err).decode("utf-8", "replace") or ffi.string(lib.fkv_strerror(st)).decode())
        self.config: Dict[str, Any] = _read_config(cfg, ev)
        self._h = _Handle(out[0], keep)
        self._seqs: "weakref.WeakSet[Sequence]" = weakref.WeakSet()
        self._views: Dict[int, Tuple[np.ndarray, np.ndarray]] = {}
        self._next_id = 1
        self._geom = None

    # -- lifetime

    @property
    def closed(self) -> bool:
        return self._h is None

    def close(self) -> None:
        """Frees the cache and every sequence still open on it (idempotent).
        Afterwards calls on it or its sequences raise fairkv.Error."""
        h, self._h = self._h, None
        if h is None:
            return
        for s in list(self._seqs):
            s._ptr = None
            s._gone = "its cache was closed"
        self._views.clear()
        h.release()

    def __enter__(self) -> "Cache":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def __del__(self) -> None:
        try:
            self.close()
        except Exception:
            pass

    def _p(self) -> Any:
        if self._h is None:
            raise Error(lib.FKV_ESTATE, "fairkv.Cache: the cache is closed")
        return self._h.ptr

    # -- clock

    @property
    def clock_ns(self) -> int:
        """The virtual clock's time in ns (Cache(virtual_clock=True) only)."""
        if self._clock is None:
            raise Error(lib.FKV_ESTATE, "fairkv.Cache: clock_ns needs Cache(virtual_clock=True)")
        return int(self._clock[0])

    @clock_ns.setter
    def clock_ns(self, t: int) -> None:
        if self._clock is None:
            raise Error(lib.FKV_ESTATE, "fairkv.Cache: clock_ns needs Cache(virtual_clock=True)")
        self._clock[0] = int(t)

    # -- sequences

    def sequence(
        self,
        *,
        tenant: int = 0,
        salt: int = 0,
        request_id: Optional[int] = None,
        client_id: int = 0,
        weight: float = 1.0,
        expected_tokens: int = 0,
        block_ids: Optional[Iterable[int]] = None,
        shared_prefix_tokens: int = 0,
    ) -> "Sequence":
        """Opens a sequence (a request): fkv_seq_create.  ``request_id``
        defaults to the next unused number; ``block_ids`` selects hash-id
        mode (fkv_seq_create_blocks: each id names ``block_tokens`` tokens)."""
        p = self._params(tenant, salt, request_id, client_id, weight, expected_tokens, shared_prefix_tokens)
        ids = None if block_ids is None else [_u64(b, "block_ids[]") for b in block_ids]
        out = ffi.new("fkv_seq **")
        if ids is None:
            st = lib.fkv_seq_create(self._p(), p, out)
        else:
            st = lib.fkv_seq_create_blocks(self._p(), p, ffi.new("uint64_t[]", ids) if ids else ffi.NULL, len(ids),
                                           out)
        if st:
            _raise(st, "fairkv.Cache.sequence")
        return Sequence(self, out[0], len(ids) if ids else 0)

    def _params(self, tenant: int, salt: int, request_id: Optional[int], client_id: int, weight: float,
                expected_tokens: int, shared_prefix_tokens: int) -> Any:
        p = ffi.new("fkv_seq_params *")
        lib.fkv_seq_params_default(p)
        if request_id is None:
            request_id = self._next_id
            self._next_id += 1
        p.request_id = _u64(request_id, "request_id")
        p.client_id = _u64(client_id, "client_id")
        p.tenant = _u64(tenant, "tenant")
        p.cache_salt = _u64(salt, "salt")
        if isinstance(weight, bool) or not isinstance(weight, (int, float)) or not math.isfinite(weight):
            raise _einval(f"weight must be a finite number, got {weight!r}")
        p.weight = float(weight)
        p.expected_tokens = _u32(expected_tokens, "expected_tokens")
        p.shared_prefix_tokens = _u32(shared_prefix_tokens, "shared_prefix_tokens")
        return p

    # -- tenants

    def set_tenant_weight(self, tenant: int, weight: float) -> None:
        """A tenant's weight in the max-min shares ((0, 1e9], default 1)."""
        if isinstance(weight, bool) or not isinstance(weight, (int, float, np.integer, np.floating)):
            raise _einval(f"fairkv.Cache.set_tenant_weight: weight must be a number, got {weight!r}")
        st = lib.fkv_cache_set_tenant_weight(self._p(), _u64(tenant, "tenant"), float(weight))
        if st:
            _raise(st)

    def tenant_info(self, tenant: int) -> Dict[str, Any]:
        """fkv_cache_tenant_info as a dict (reclaimed_pages by action)."""
        ti = ffi.new("fkv_tenant_info *")
        st = lib.fkv_cache_tenant_info(self._p(), _u64(tenant, "tenant"), ti)
        if st:
            _raise(st)
        names = [ffi.string(lib.fkv_reclaim_name(a)).decode() for a in range(6)] + ["idle"]
        return {
            "tenant": ti.tenant, "weight": ti.weight, "pages": ti.pages, "demand_pages": ti.demand_pages,
            "share_pages": ti.share_pages, "seqs": ti.seqs,
            "reclaimed_pages": {names[i]: ti.reclaimed_pages[i] for i in range(7)},
            "prefix_query_tokens": ti.prefix_query_tokens, "prefix_hit_tokens": ti.prefix_hit_tokens,
            "host_bytes": ti.host_bytes, "host_share_bytes": ti.host_share_bytes,
        }

    # -- state and metrics

    def info(self) -> Dict[str, int]:
        """fkv_cache_get_info: pages, free pages, bytes, chunks, sequences."""
        i = ffi.new("fkv_cache_info *")
        st = lib.fkv_cache_get_info(self._p(), i)
        if st:
            _raise(st)
        return {k: getattr(i, k) for k in ("page_tokens", "n_pages", "free_pages", "page_bytes", "token_bytes",
                                           "n_chunks", "n_seqs")}

    def counters(self) -> Dict[str, Any]:
        """fkv_cache_counters; the per-class ones as {class: value}."""
        c = ffi.new("fkv_counters *")
        st = lib.fkv_cache_counters(self._p(), c)
        if st:
            _raise(st)
        cls = ("short", "medium", "long")
        out: Dict[str, Any] = {k: {cls[i]: getattr(c, k)[i] for i in range(3)}
                               for k in ("hit_tokens", "miss_tokens", "evicted_chunks")}
        for k in ("evicted_pages", "prefix_query_tokens", "prefix_hit_tokens", "quota_overruns", "cow_copies",
                  "pages_used", "pages_free", "host_demoted_chunks", "host_demoted_bytes", "host_refused_chunks"):
            out[k] = getattr(c, k)
        return out

    def _text(self, fn: Any) -> str:
        cap = 1 << 16
        n = ffi.new("size_t *")
        while True:
            buf = ffi.new("char[]", cap)
            st = fn(self._p(), buf, cap, n)
            if st:
                _raise(st)
            if n[0] < cap:
                return ffi.string(buf, n[0]).decode()
            cap = n[0] + 1

    def metrics(self) -> Dict[str, Any]:
        """Every metric of the cache as a dict (fkv_cache_metrics_json)."""
        return json.loads(self._text(lib.fkv_cache_metrics_json))

    def prometheus(self) -> str:
        """The metrics in Prometheus text format 0.0.4."""
        return self._text(lib.fkv_cache_metrics_prometheus)

    def evict(self, pages: int) -> int:
        """Evicts chunks until `pages` pages are free; returns the pages freed."""
        freed = ffi.new("uint32_t *")
        st = lib.fkv_cache_evict(self._p(), _u32(pages, "pages"), freed)
        if st:
            _raise(st)
        return int(freed[0])

    # -- K/V storage

    def kv(self, layer: int) -> Tuple[np.ndarray, np.ndarray]:
        """Layer `layer`'s K and V arrays, numpy views of the library's
        memory (storage="cpu" only): shape [n_pages, page_tokens,
        n_kv_heads, head_dim], dtype float32 or float16.  Write token i's K
        at ``K[slots[i, 0], slots[i, 1]]`` with the slots ``append``
        returned.  No copy: the kernels read what is written here.  The
        arrays live as long as the cache (and past close() while a view
        does).  Pages of chunks stored quantized (quant_mode, reclaim) hold
        int8/int4 codes in fairkv_quant.h's layout, not values of dtype."""
        p = self._p()
        layer = _u32(layer, "layer")
        got = self._views.get(layer)
        if got is not None:
            return got
        k = ffi.new("void **")
        v = ffi.new("void **")
        stride = ffi.new("uint64_t *")
        st = lib.fkv_cache_layer_storage(p, layer, k, v, stride)
        if st:
            _raise(st, "fairkv.Cache.kv")
        cfg = self.config
        n_pages = self.info()["n_pages"]
        dt = np.dtype(np.float32 if cfg["dtype"] == "f32" else np.float16)
        shape = (n_pages, cfg["page_tokens"], cfg["n_kv_heads"], cfg["head_dim"])
        strides = (stride[0], cfg["n_kv_heads"] * cfg["head_dim"] * dt.itemsize, cfg["head_dim"] * dt.itemsize,
                   dt.itemsize)
        views = tuple(self._view(ptr[0], n_pages * stride[0], shape, strides, dt) for ptr in (k, v))
        self._views[layer] = views  # type: ignore[assignment]
        self._geom = (n_pages, stride[0])
        return views  # type: ignore[return-value]

    def _view(self, ptr: Any, nbytes: int, shape: Tuple[int, ...], strides: Tuple[int, ...], dt: Any) -> np.ndarray:
        h = self._h
        assert h is not None
        h.acquire()
        # the buffer keeps this cdata alive, and its destructor (run when the
        # last view of the buffer goes) gives the handle back
        owner = ffi.gc(ffi.cast("char *", ptr), lambda _c, h=h: h.release())
        return np.ndarray(shape, dtype=dt, buffer=ffi.buffer(owner, nbytes), strides=strides)

    # -- attention

    def _kv_args(self, layer: int) -> Tuple[Any, Any]:
        if self.config["storage"] != "cpu":
            raise Error(lib.FKV_EUNSUPPORTED, "fairkv attention: the cache has phantom storage (storage='cpu' needed)")
        k, v = self.kv(layer)
        n_pages, stride = self._geom  # type: ignore[misc]
        cfg = self.config
        geom = ffi.new("fkv_kv_geom *", {
            "n_layers": cfg["n_layers"], "n_kv_heads": cfg["n_kv_heads"], "head_dim": cfg["head_dim"],
            "page_tokens": cfg["page_tokens"], "base": _DTYPES[cfg["dtype"]], "page_stride": stride,
            "n_pages": n_pages})
        kvs = ffi.new("fkv_attn_kv *", {"geom": geom, "layer": layer, "k": ffi.from_buffer(k),
                                        "v": ffi.from_buffer(v)})
        return kvs, (geom, k, v)

    def _queries(self, q: Any, lead: int, what: str) -> np.ndarray:
        qa = np.ascontiguousarray(q, dtype=np.float32)
        hd, nkv = self.config["head_dim"], self.config["n_kv_heads"]
        if qa.ndim != 3 or qa.shape[0] != lead or qa.shape[2] != hd or qa.shape[1] % nkv or qa.shape[1] == 0:
            raise _einval(f"{what}: q must be [{lead}][n_heads][{hd}] with n_heads a multiple of "
                          f"n_kv_heads={nkv}, got shape {qa.shape}")
        return qa

    def attention_decode(self, layer: int, seqs: SeqT["Sequence"], q: Any, scale: Optional[float] = None) -> np.ndarray:
        """Decode attention (fkv_attn_decode) of one query token per
        sequence over its whole chunk table, reading K/V in place.
        q: [len(seqs), n_heads, head_dim]; returns the same shape (float32).
        scale defaults to 1/sqrt(head_dim).  The sequences are pinned
        during the call."""
        seqs = list(seqs)
        for s in seqs:
            if not isinstance(s, Sequence) or s._cache is not self:
                raise _einval(f"fairkv.Cache.attention_decode: {s!r} is not a sequence of this cache")
        qa = self._queries(q, len(seqs), "fairkv.Cache.attention_decode")
        kvs, keep = self._kv_args(_u32(layer, "layer"))
        out = np.empty_like(qa)
        aseqs = ffi.new("fkv_attn_seq[]", len(seqs))
        pinned = []
        try:
            for s in seqs:
                s.pin()
                pinned.append(s)
            for i, s in enumerate(seqs):
                chunks, n = s._chunks()
                aseqs[i].chunks = chunks
                aseqs[i].n_chunks = n
            err = ffi.new("char[256]")
            sc = 1.0 / math.sqrt(self.config["head_dim"]) if scale is None else float(scale)
            st = lib.fkv_attn_decode(ffi.NULL, kvs, qa.shape[1], aseqs, len(seqs), ffi.from_buffer("float[]", qa),
                                     ffi.from_buffer("float[]", out), sc, err, 256)
            if st:
                raise Error(st, ffi.string(err).decode())
        finally:
            for s in pinned:
                s.unpin()
        del keep
        return out

    def attention_prefill(self, layer: int, seq: "Sequence", q: Any, q_pos0: int = 0,
                          scale: Optional[float] = None) -> np.ndarray:
        """Causal prefill attention (fkv_attn_prefill) of one sequence:
        query i sits at position q_pos0 + i.  q: [n_q, n_heads, head_dim]."""
        if not isinstance(seq, Sequence) or seq._cache is not self:
            raise _einval(f"fairkv.Cache.attention_prefill: {seq!r} is not a sequence of this cache")
        qa = np.ascontiguousarray(q, dtype=np.float32)
        qa = self._queries(qa, qa.shape[0] if qa.ndim == 3 else -1, "fairkv.Cache.attention_prefill")
        kvs, keep = self._kv_args(_u32(layer, "layer"))
        out = np.empty_like(qa)
        with seq.pin():
            chunks, n = seq._chunks()
            aseq = ffi.new("fkv_attn_seq *", {"chunks": chunks, "n_chunks": n})
            err = ffi.new("char[256]")
            sc = 1.0 / math.sqrt(self.config["head_dim"]) if scale is None else float(scale)
            st = lib.fkv_attn_prefill(ffi.NULL, kvs, qa.shape[1], aseq, _u32(q_pos0, "q_pos0"), qa.shape[0],
                                      ffi.from_buffer("float[]", qa), ffi.from_buffer("float[]", out), sc, err, 256)
            if st:
                raise Error(st, ffi.string(err).decode())
        del keep
        return out


class _Pin:
    """What Sequence.pin() returns: unpins once, on leaving its ``with``
    block or on ``release()``."""

    __slots__ = ("_seq", "_done")

    def __init__(self, seq: "Sequence"):
        self._seq = seq
        self._done = False

    def release(self) -> None:
        if not self._done:
            self._done = True
            self._seq.unpin()

    def __enter__(self) -> "Sequence":
        return self._seq

    def __exit__(self, *exc: Any) -> None:
        self.release()


class Sequence:
    """A request's token sequence (fkv_seq), made by ``Cache.sequence()``.

    ``free()`` (or leaving its ``with`` block) ends it; its chunks stay
    cached if the prefix cache is on.  After free, or once its cache is
    closed, calls raise ``fairkv.Error`` (ESTATE).
    """

    def __init__(self, cache: Cache, ptr: Any, n_blocks: int = 0):
        self._cache = cache
        self._ptr = ptr
        self._n_blocks = n_blocks
        self._out = ffi.new("uint32_t *")
        self._gone = ""
        self.id = int(lib.fkv_seq_id(ptr))
        cache._seqs.add(self)

    def _p(self) -> Any:
        if self._ptr is None:
            raise Error(lib.FKV_ESTATE, f"fairkv.Sequence {self.id}: {self._gone}; it can no longer be used")
        return self._ptr

    # -- lifetime

    def free(self) -> None:
        """Ends the sequence (fkv_seq_free).  Idempotent."""
        if self._ptr is not None:
            ptr, self._ptr = self._ptr, None
            self._gone = "it was freed"
            lib.fkv_seq_free(ptr)

    @property
    def freed(self) -> bool:
        return self._ptr is None

    def __enter__(self) -> "Sequence":
        return self

    def __exit__(self, *exc: Any) -> None:
        if self._ptr is not None:
            self.free()

    def __del__(self) -> None:
        try:
            if self._ptr is not None and not self._cache.closed:
                self.free()
        except Exception:
            pass

    # -- tokens

    def _hash_n(self, n_tokens: Optional[int], max_tokens: Optional[int]) -> Tuple[int, int]:
        if not self._n_blocks:
            raise _einval(f"fairkv.Sequence {self.id}: match without tokens needs block_ids (hash-id mode)")
        n = self._n_blocks * self._cache.config["block_tokens"] if n_tokens is None else _u32(n_tokens, "n_tokens")
        return n, n if max_tokens is None else _u32(max_tokens, "max_tokens")

    def _match(self, tokens: Any, max_tokens: Optional[int], n_tokens: Optional[int], tiers: int,
               who: str) -> Dict[str, int]:
        p = self._p()
        mi = ffi.new("fkv_match_info *")
        if tokens is None:
            n, mx = self._hash_n(n_tokens, max_tokens)
            st = lib.fkv_seq_match_prefix(p, ffi.NULL, n, mx, tiers, mi)
        else:
            arr = _tokens_arg(tokens, who)
            mx = max(arr.size - 1, 0) if max_tokens is None else _u32(max_tokens, "max_tokens")
            st = lib.fkv_seq_match_prefix(p, ffi.from_buffer("int32_t[]", arr), arr.size, mx, tiers, mi)
        if st:
            _raise(st, who)
        return {"device_tokens": mi.device_tokens, "host_tokens": mi.host_tokens, "host_bytes": mi.host_bytes}

    def match(self, tokens: Any = None, max_tokens: Optional[int] = None, *, n_tokens: Optional[int] = None) -> int:
        """Attaches the cached prefix of `tokens` (or, in hash-id mode, of
        the sequence's block ids when tokens is None: a prompt of n_tokens,
        by default every block's tokens) found on the device; returns the
        tokens now present (fkv_seq_match_prefix, FKV_MATCH_DEVICE_ONLY).
        max_tokens defaults to len(tokens) - 1 (one token is left to
        compute), in hash-id mode to n_tokens."""
        mi = self._match(tokens, max_tokens, n_tokens, lib.FKV_MATCH_DEVICE_ONLY, "fairkv.Sequence.match")
        return int(mi["device_tokens"])

    def match_tiers(self, tokens: Any = None, max_tokens: Optional[int] = None, *,
                    n_tokens: Optional[int] = None) -> Dict[str, int]:
        """match across the device and the host tier (fkv_seq_match_prefix,
        FKV_MATCH_ALL_TIERS): {"device_tokens", "host_tokens", "host_bytes"}.
        Host-resident chunks are attached offloaded: ``fetch()`` copies
        them back."""
        return self._match(tokens, max_tokens, n_tokens, lib.FKV_MATCH_ALL_TIERS, "fairkv.Sequence.match_tiers")

    def append(self, tokens: Any, *, slots: bool = True) -> Optional[np.ndarray]:
        """Appends tokens (a sequence of ids, or a count when the prefix cache
        is off or in hash-id mode) and returns where each one's K/V goes: a
        uint32 array [n, 2] of (page, slot), to index ``Cache.kv()``'s
        arrays with (slots=False: returns None, a little cheaper, for
        phantom storage).  Raises fairkv.Error (EFULL) when nothing is
        evictable; then nothing was appended."""
        p = self._ptr
        if p is None:
            p = self._p()  # raises
        if type(tokens) is np.ndarray and tokens.dtype is _I32 and tokens.ndim == 1 and tokens.flags.c_contiguous:
            n = tokens.shape[0]  # the common case, checked cheaply
            tok = ffi.from_buffer(_T_I32, tokens)
        elif isinstance(tokens, (int, np.integer)) and not isinstance(tokens, bool):
            n = _u32(tokens, "fairkv.Sequence.append: n")
            tok = ffi.NULL
        else:
            arr = _tokens_arg(tokens, "fairkv.Sequence.append")
            n = arr.size
            tok = ffi.from_buffer(_T_I32, arr)
        if slots:
            out = np.empty((n, 2), dtype=np.uint32)
            st = lib.fkv_seq_append(p, tok, n, ffi.from_buffer(_T_SLOT, out))
        else:
            out = None
            st = lib.fkv_seq_append(p, tok, n, ffi.NULL)
        if st:
            _raise(st, "fairkv.Sequence.append")
        return out

    def fork(self, *, tenant: Optional[int] = None, salt: int = 0, request_id: Optional[int] = None,
             client_id: int = 0, weight: float = 1.0, expected_tokens: int = 0) -> "Sequence":
        """A child sharing every chunk by reference (copy on first write)."""
        p = self._p()
        pp = self._cache._params(self.tenant if tenant is None else tenant, salt, request_id, client_id, weight,
                                 expected_tokens, 0)
        out = ffi.new("fkv_seq **")
        st = lib.fkv_seq_fork(p, pp, out)
        if st:
            _raise(st, "fairkv.Sequence.fork")
        return Sequence(self._cache, out[0])

    def touch(self) -> int:
        """One engine step reads the sequence: counts hits and misses,
        heats its chunks.  Returns the tokens that must be recomputed."""
        m = self._out
        p = self._ptr
        st = lib.fkv_seq_touch(p if p is not None else self._p(), m)
        if st:
            _raise(st, "fairkv.Sequence.touch")
        return m[0]

    def pin(self) -> _Pin:
        """Pins the sequence's chunks (never evicted while pinned; pins
        nest).  Returns a context manager that unpins on exit:
        ``with seq.pin(): ...``."""
        st = lib.fkv_seq_pin(self._p())
        if st:
            _raise(st, "fairkv.Sequence.pin")
        return _Pin(self)

    def unpin(self) -> None:
        st = lib.fkv_seq_unpin(self._p())
        if st:
            _raise(st, "fairkv.Sequence.unpin")

    def missing(self) -> List[Tuple[int, int]]:
        """The [start, end) token ranges whose chunks were evicted."""
        p = self._p()
        n = ffi.new("size_t *")
        cap = 16
        while True:
            out = ffi.new("fkv_range[]", cap)
            st = lib.fkv_seq_missing(p, out, cap, n)
            if st:
                _raise(st, "fairkv.Sequence.missing")
            if n[0] <= cap:
                return [(out[i].start, out[i].end) for i in range(n[0])]
            cap = n[0]

    def fetch(self, start: int = 0, end: Optional[int] = None, sources: Tuple[str, ...] = ("recompute", "host")
              ) -> Dict[str, Any]:
        """Brings the chunks in [start, end) that are not on the device back
        (fkv_seq_fetch) from `sources`: "recompute" (evicted chunks get
        pages; recompute their K/V into the returned slots) and "host"
        (the host tier's copies come back as they were).  Returns
        {"slots", "recompute_tokens", "host_tokens", "host_bytes"}."""
        frm = 0
        for src in sources:
            if src not in _FETCH:
                raise _einval(f"fairkv.Sequence.fetch: source {src!r} is not one of {', '.join(_FETCH)}")
            frm |= _FETCH[src]
        p = self._p()
        start = _u32(start, "start")
        end = len(self) if end is None else _u32(end, "end")
        slots = np.empty((max(end - start, 0), 2), dtype=np.uint32)
        fi = ffi.new("fkv_fetch_info *")
        st = lib.fkv_seq_fetch(p, start, end, frm, ffi.from_buffer("fkv_slot[]", slots) if slots.size else ffi.NULL,
                               fi)
        if st:
            _raise(st, "fairkv.Sequence.fetch")
        return {"slots": slots[: fi.recompute_tokens], "recompute_tokens": int(fi.recompute_tokens),
                "host_tokens": int(fi.host_tokens), "host_bytes": int(fi.host_bytes)}

    def restore(self, start: int, end: int) -> np.ndarray:
        """Pages again for the evicted chunks in [start, end): returns the
        restored tokens' slots (to recompute their K/V into); fetch() from
        "recompute" alone."""
        return self.fetch(start, end, ("recompute",))["slots"]

    def drop(self, start: int, end: int) -> int:
        """Drops the chunks wholly inside [start, end) (attention sparsity)."""
        n = ffi.new("uint32_t *")
        st = lib.fkv_seq_drop(self._p(), _u32(start, "start"), _u32(end, "end"), n)
        if st:
            _raise(st, "fairkv.Sequence.drop")
        return int(n[0])

    def reclaim(self, action: str, pages: int, sink_tokens: int = 0, window_tokens: int = 0) -> int:
        """Fair reclaim (fkv_seq_reclaim) by one action: quantize8,
        quantize4, drop, evict, preempt, offload.  Returns pages freed."""
        if action not in _RECLAIM:
            raise _einval(f"fairkv.Sequence.reclaim: action {action!r} is not one of {', '.join(_RECLAIM)}")
        args = ffi.new("fkv_reclaim_args *", {"sink_tokens": _u32(sink_tokens, "sink_tokens"),
                                              "window_tokens": _u32(window_tokens, "window_tokens")})
        freed = ffi.new("uint32_t *")
        st = lib.fkv_seq_reclaim(self._p(), _RECLAIM[action], args, _u32(pages, "pages"), freed)
        if st:
            _raise(st, "fairkv.Sequence.reclaim")
        return int(freed[0])

    def promote(self, start: int = 0, end: Optional[int] = None) -> Tuple[int, int]:
        """Copies offloaded / host-matched chunks in [start, end) back to
        the device; returns (tokens, bytes) copied: fetch() from "host"
        alone."""
        got = self.fetch(start, end, ("host",))
        return got["host_tokens"], got["host_bytes"]

    def count_preempt(self) -> int:
        """Records that the sequence is about to be preempted: its pages
        count for its tenant as reclaimed by preemption
        (fkv_seq_count_preempt).  Frees nothing; returns the pages counted."""
        pages = ffi.new("uint64_t *")
        st = lib.fkv_seq_count_preempt(self._p(), pages)
        if st:
            _raise(st, "fairkv.Sequence.count_preempt")
        return int(pages[0])

    # -- state

    def __len__(self) -> int:
        return int(lib.fkv_seq_len(self._p()))

    @property
    def tenant(self) -> int:
        return int(lib.fkv_seq_tenant(self._p()))

    @property
    def pages(self) -> int:
        """Pages charged to the sequence."""
        return int(lib.fkv_seq_pages(self._p()))

    @property
    def request_class(self) -> str:
        return ffi.string(lib.fkv_class_name(lib.fkv_seq_class(self._p()))).decode()

    def _chunks(self) -> Tuple[Any, int]:
        ch = ffi.new("fkv_chunk_view *const **")
        n = ffi.new("size_t *")
        st = lib.fkv_seq_chunks(self._p(), ch, n)
        if st:
            _raise(st, "fairkv.Sequence.chunks")
        return ch[0], int(n[0])

    def chunks(self) -> List[Dict[str, Any]]:
        """A copy of the chunk table: start, n_tokens, pages, dtype, state,
        and the chunk's info (refs, pins, access_count, ...)."""
        ch, n = self._chunks()
        out = []
        for i in range(n):
            c = ch[i]
            pages = [c.pages[j] for j in range(c.n_pages)] if c.pages != ffi.NULL else []
            out.append({"start": c.start, "n_tokens": c.n_tokens, "cap_tokens": c.cap_tokens, "pages": pages,
                        "dtype": ffi.string(lib.fkv_dtype_name(c.dtype)).decode(), "resident": bool(c.resident),
                        "dropped": bool(c.dropped), "offloaded": bool(c.offloaded)})
        p = self._p()
        info = ffi.new("fkv_chunk_info *")
        for i, d in enumerate(out):
            if lib.fkv_seq_chunk_info(p, i, info) == 0:
                d.update(refs=info.refs, pins=info.pins, access_count=info.access_count, owner=info.owner)
        return out

    def __repr__(self) -> str:
        state = f"len={len(self)}" if self._ptr is not None else self._gone
        return f"<fairkv.Sequence {self.id} {state}>"
