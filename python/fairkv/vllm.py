"""An offloading manager shaped like vLLM's.

``fairkv.vllm.OffloadingManager`` has the six calls of vLLM v1's
``OffloadingManager`` (vllm/v1/kv_offload/abstract.py: ``lookup``,
``prepare_load``, ``touch``, ``complete_load``, ``prepare_store``,
``complete_store``, and ``take_events``) over a fairkv cache used as the
offload store.  It is an adapter, not a vLLM plugin: it imports nothing of
vLLM (none is installed where the tests run), and its return values are
this module's own dataclasses with the same fields as vLLM's
(``PrepareStoreOutput``, ``OffloadingEvent``) and a ``LoadStoreSpec`` that
names the fairkv pages holding each block.

How blocks map onto fairkv: one block is one page-sized chunk of its own
hash-id sequence (vLLM's block hashes already chain over the prefix, so a
block is keyed by its hash alone).  Stored blocks sit in the cache's pages
(the first level); when the pages fill, the cache's policy chooses victims
and, with ``host_capacity_bytes`` and ``host_demote`` set, demotes them to
the library's host tier (the second level) instead of dropping them.
``lookup`` finds blocks in either tier (fkv_seq_match_prefix, all tiers);
``prepare_load`` copies host-tier blocks back into pages
(fkv_seq_fetch from the host tier) and pins them until ``complete_load``.  A worker copies
K/V between the engine and ``Cache.kv()``'s arrays at the spec's pages.

With ``redis_url`` (or ``redis=`` a client), a Redis tier sits below
both: every stored block's K/V (all layers) is also written to Redis when
its store completes (write-through), ``lookup`` counts blocks found only
there, and ``prepare_load`` reads them back into pages, checking the value's
header (format, geometry, block key), length and digest before a byte
reaches the cache.  This tier is the package's own, over Debian's python3-redis: the
fairkv command's remote tier (src/remote) is not part of libfairkv, and its
key and value format is not shared with it.

Block hashes that are not 64-bit integers are reduced to 64 bits with
BLAKE2b.
"""
from __future__ import annotations

import hashlib
import struct
from dataclasses import dataclass
from typing import Any, Dict, Iterable, List, Optional

import numpy as np

from ._core import Cache, Error, Sequence

MEDIUM = "fairkv"
# a Redis value: magic, version, then n_layers, n_kv_heads, head_dim,
# block tokens, dtype (0 f32, 1 f16) and the block's 64-bit key; a BLAKE2b
# digest (16 bytes) of the rest; then each layer's K page and V page, raw
_MAGIC = b"FKVBLK"
_HEADER = struct.Struct("<6sHIIIIIQ")
_DIGEST = 16


def _digest(payload: Any) -> bytes:
    return hashlib.blake2b(payload, digest_size=_DIGEST).digest()


@dataclass
class LoadStoreSpec:
    """Where blocks live in the store: pages[i] is the fairkv page of
    block_hashes[i] (index ``Cache.kv(layer)[0 or 1][page]``)."""
    block_hashes: List[Any]
    pages: List[int]

    @staticmethod
    def medium() -> str:
        return MEDIUM


@dataclass
class PrepareStoreOutput:
    block_hashes_to_store: List[Any]
    store_spec: LoadStoreSpec
    block_hashes_evicted: List[Any]


@dataclass
class OffloadingEvent:
    block_hashes: List[Any]
    block_size: int
    medium: str
    removed: bool  # True: removed from the store; False: stored


def _key(h: Any) -> int:
    if isinstance(h, int) and 0 <= h < 2**64:
        return h
    data = h if isinstance(h, (bytes, bytearray)) else repr(h).encode()
    return int.from_bytes(hashlib.blake2b(bytes(data), digest_size=8).digest(), "little")


class OffloadingManager:
    """vLLM's OffloadingManager calls over a fairkv cache.

    ``OffloadingManager(block_size=16, n_layers=.., n_kv_heads=..,
    head_dim=.., capacity_pages=.., host_capacity_bytes=..)``: the cache is
    made with pages of one block, chunks of one block, the prefix cache on
    and real storage; any other Cache keyword may be given.  Or pass
    ``cache=`` a Cache made that way.
    """

    def __init__(self, block_size: int = 16, *, cache: Optional[Cache] = None, tenant: int = 0,
                 redis_url: Optional[str] = None, redis: Any = None, redis_prefix: str = "fairkv:block:",
                 **config: Any):
        if cache is None:
            cfg = dict(storage="cpu", page_tokens=block_size, chunk_tokens=block_size, block_tokens=block_size,
                       prefix_cache=True)
            if config.get("host_capacity_bytes"):
                cfg["host_demote"] = True
            cfg.update(config)
            cache = Cache(**cfg)
        c = cache.config
        if c["page_tokens"] != block_size or c["block_tokens"] != block_size or c["chunk_tokens"] != block_size:
            raise Error(1, f"fairkv.vllm.OffloadingManager: the cache needs page_tokens = block_tokens = "
                           f"chunk_tokens = block_size={block_size}")
        self.cache = cache
        self.block_size = block_size
        self.tenant = tenant
        self._storing: Dict[Any, Sequence] = {}
        self._loading: Dict[Any, List[Sequence]] = {}
        self._stored: Dict[Any, None] = {}  # completed blocks, in store order
        self._events: List[OffloadingEvent] = []
        #: blocks loaded, those of them copied back from the host tier, and
        #: from Redis; Redis writes that failed (the block stays in fairkv)
        self.stats = {"loaded_blocks": 0, "promoted_blocks": 0, "promoted_bytes": 0, "remote_loaded_blocks": 0,
                      "remote_stored_blocks": 0, "remote_store_errors": 0}
        self._redis = redis
        if redis_url is not None and redis is None:
            try:
                import redis as redis_mod  # Debian: python3-redis
            except ImportError as e:
                raise Error(8, "fairkv.vllm.OffloadingManager: redis_url needs the redis module "
                               "(Debian: python3-redis)") from e
            self._redis = redis_mod.Redis.from_url(redis_url, socket_timeout=5)
        self._redis_prefix = redis_prefix
        self._redis_url = redis_url or "redis"
        self._cfg = c

    # -- helpers

    def _seq(self, h: Any) -> Sequence:
        return self.cache.sequence(tenant=self.tenant, block_ids=[_key(h)])

    def _where(self, h: Any) -> Optional[Sequence]:
        """A sequence holding block h attached (device or host tier), or
        None (the probe is freed)."""
        s = self._seq(h)
        got = s.match_tiers()
        if got["device_tokens"] + got["host_tokens"] == self.block_size:
            return s
        s.free()
        return None

    def _present(self, h: Any) -> bool:
        s = self._where(h)
        if s is None:
            return False
        s.free()
        return True

    # -- the Redis tier

    def _rkey(self, h: Any) -> str:
        return f"{self._redis_prefix}{self.tenant}:{_key(h):016x}"

    def _header(self, h: Any) -> bytes:
        c = self._cfg
        return _HEADER.pack(_MAGIC, 1, c["n_layers"], c["n_kv_heads"], c["head_dim"], self.block_size,
                            0 if c["dtype"] == "f32" else 1, _key(h))

    def _remote_has(self, h: Any) -> bool:
        if self._redis is None:
            return False
        try:
            return bool(self._redis.exists(self._rkey(h)))
        except Exception as e:  # an unreachable tier is a miss, not a failed lookup
            self._remote_error = str(e)
            return False

    def _remote_put(self, h: Any, page: int) -> None:
        parts = []
        for layer in range(self._cfg["n_layers"]):
            k, v = self.cache.kv(layer)
            parts += [k[page].tobytes(), v[page].tobytes()]
        payload = b"".join(parts)
        try:
            self._redis.set(self._rkey(h), self._header(h) + _digest(payload) + payload)
            self.stats["remote_stored_blocks"] += 1
        except Exception:
            self.stats["remote_store_errors"] += 1  # still stored in fairkv

    def _remote_get(self, h: Any, page: int) -> None:
        key = self._rkey(h)
        try:
            val = self._redis.get(key)
        except Exception as e:
            raise Error(6, f"fairkv.vllm.prepare_load: block {h!r}: reading {key} from {self._redis_url}: {e}") from e
        if val is None:
            raise Error(4, f"fairkv.vllm.prepare_load: block {h!r}: {key} is gone from {self._redis_url}")
        c = self._cfg
        page_bytes = self.cache.kv(0)[0][0].nbytes
        want = _HEADER.size + _DIGEST + 2 * c["n_layers"] * page_bytes
        head = self._header(h)
        off = _HEADER.size + _DIGEST
        got = None
        if len(val) != want or val[:_HEADER.size] != head:
            got = "its header differs (format, geometry or block key)" if len(val) == want else \
                f"{len(val)} bytes where {want} were expected"
        elif _digest(memoryview(val)[off:]) != val[_HEADER.size:off]:
            got = "its K/V bytes do not match the digest stored with them"
        if got is not None:
            raise Error(7, f"fairkv.vllm.prepare_load: block {h!r}: the value of {key} read back from "
                           f"{self._redis_url} is not this cache's block: {got}")
        for layer in range(c["n_layers"]):
            k, v = self.cache.kv(layer)
            for arr in (k, v):
                arr[page] = np.frombuffer(val, dtype=arr.dtype, count=arr[page].size, offset=off).reshape(arr[page].shape)
                off += page_bytes

    # -- the six calls

    def lookup(self, block_hashes: Iterable[Any]) -> int:
        """The number of leading blocks that are stored (either tier)."""
        n = 0
        for h in block_hashes:
            if h in self._storing or not (self._present(h) or self._remote_has(h)):
                break
            n += 1
        return n

    def prepare_load(self, block_hashes: Iterable[Any]) -> LoadStoreSpec:
        """Brings the blocks into pages (host-tier ones are copied back)
        and pins them until complete_load.  All must be stored."""
        hashes = list(block_hashes)
        got: List[Sequence] = []
        try:
            for h in hashes:
                s = self._where(h)
                if s is None and self._redis is not None and h not in self._storing:
                    s = self._seq(h)  # from Redis into a new page
                    got.append(s)
                    s.pin()
                    page = int(s.append(self.block_size)[0, 0])
                    self._remote_get(h, page)
                    self.stats["remote_loaded_blocks"] += 1
                    self.stats["loaded_blocks"] += 1
                    continue
                if s is None:
                    raise Error(4, f"fairkv.vllm.prepare_load: block {h!r} is not stored")
                got.append(s)
                s.pin()
                tokens, nbytes = s.promote()
                self.stats["loaded_blocks"] += 1
                self.stats["promoted_blocks"] += tokens // self.block_size
                self.stats["promoted_bytes"] += nbytes
        except Exception:
            for s in got:
                if s.freed:
                    continue
                if s.chunks() and s.chunks()[0]["owner"] == s.id:
                    s.drop(0, self.block_size)  # a block half read from Redis is not kept
                s.free()
            raise
        pages = []
        for h, s in zip(hashes, got):
            self._loading.setdefault(h, []).append(s)
            pages.append(s.chunks()[0]["pages"][0])
        return LoadStoreSpec(hashes, pages)

    def touch(self, block_hashes: Iterable[Any]) -> None:
        """Marks the stored blocks as used now (heats them for the policy)."""
        for h in block_hashes:
            s = self._where(h)
            if s is not None:
                s.touch()
                s.free()

    def complete_load(self, block_hashes: Iterable[Any]) -> None:
        """Unpins blocks prepare_load pinned: they may be evicted again."""
        for h in block_hashes:
            lst = self._loading.get(h)
            if not lst:
                raise Error(5, f"fairkv.vllm.complete_load: block {h!r} is not being loaded")
            s = lst.pop()
            if not lst:
                del self._loading[h]
            s.free()

    def prepare_store(self, block_hashes: Iterable[Any]) -> Optional[PrepareStoreOutput]:
        """Gives pages to the blocks not yet stored, pinned until
        complete_store.  None if the store cannot hold them (nothing
        changed then)."""
        todo = [h for h in dict.fromkeys(block_hashes) if h not in self._storing and not self._present(h)]
        before = self.cache.counters()["evicted_pages"]
        made: List[Sequence] = []
        pages: List[int] = []
        for h in todo:
            s = self._seq(h)
            made.append(s)
            try:
                s.pin()
                slots = s.append(self.block_size)
            except Error as e:
                if e.status_name != "EFULL":
                    raise
                for m in made:
                    m.free()
                return None
            pages.append(int(slots[0, 0]))
        for h, s in zip(todo, made):
            self._storing[h] = s
        evicted: List[Any] = []
        if self.cache.counters()["evicted_pages"] != before:
            evicted = [h for h in self._stored if not self._present(h) and not self._remote_has(h)]
            for h in evicted:
                del self._stored[h]
            if evicted:
                self._events.append(OffloadingEvent(evicted, self.block_size, MEDIUM, True))
        return PrepareStoreOutput(todo, LoadStoreSpec(todo, pages), evicted)

    def complete_store(self, block_hashes: Iterable[Any], success: bool = True) -> None:
        """The blocks' K/V are written: they become loadable.  With
        success=False they are removed instead."""
        done = []
        for h in block_hashes:
            s = self._storing.pop(h, None)
            if s is None:
                continue
            if success and self._redis is not None:
                self._remote_put(h, s.chunks()[0]["pages"][0])
            s.unpin()
            if success:
                self._stored[h] = None
                done.append(h)
            else:
                s.drop(0, self.block_size)
            s.free()
        if done:
            self._events.append(OffloadingEvent(done, self.block_size, MEDIUM, False))

    def take_events(self) -> Iterable[OffloadingEvent]:
        """Stores and removals since the last call."""
        ev, self._events = self._events, []
        yield from ev

    def close(self) -> None:
        self.cache.close()
