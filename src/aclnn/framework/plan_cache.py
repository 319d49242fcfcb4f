"""The aclnn cache: phase 1 reused when a call repeats, as CANN does (ACLNN_CACHE_LIMIT).

CANN keeps the workspace size and executor of recent GetWorkspaceSize calls and reuses
them when the same operator is called again with the same arguments, which spares the
checks and the planning. So does this module. A call's key is its operator, the SoC and
its arguments: tensors by identity, int arrays by their values, Python scalars (int,
float, bool, str, None) by type and exact value. A call with any other argument is not
cached, nor one on the functional API's borrowed memory (its tensors live for one call).

A cached plan is taken only while every tensor of the call is live and every int array
undestroyed; otherwise phase 1 runs in full and reports the failure as always. Only
successful calls are stored. An entry never outlives what it refers to: a tensor that is
garbage-collected takes its entries with it (weak references), and so does an allocation
that is freed (`_memory.release_listeners`), so a cached plan never keeps freed memory.

Unlike CANN's cache, which each thread keeps for itself, this one is shared by the
process: at most ACLNN_CACHE_LIMIT entries (default 10000, as in CANN; 0 turns the cache
off), the least recently used dropped first. `configure` changes the limit in-process.
"""

from __future__ import annotations

import os
import threading
import weakref
from collections.abc import Sequence
from dataclasses import dataclass

from ..acl import _memory, get_contract, get_soc_name
from ..tensor import aclIntArray, aclTensor

DEFAULT_LIMIT = 10000
_SCALARS = (int, float, bool, str, type(None))


@dataclass(frozen=True)
class _Entry:
    steps: tuple
    workspace_size: int
    tensor_positions: tuple[int, ...]  # where the plan's tensors are among the arguments
    tensors: tuple[weakref.ref, ...]   # the call's tensors, by argument position
    regions: tuple                     # their allocations (strong: keeps the ids stable)


class PlanCache:
    """Phase-1 results by call (see the module docstring). Thread-safe: one lock around
    every change; a tensor's collection, which can happen inside any of them, only queues
    its entries' keys, dropped at the next lookup or store."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self._lock = threading.Lock()
        self._entries: dict[tuple, _Entry] = {}
        self._keys_by_region: dict[int, set[tuple]] = {}
        self._collected: list[tuple] = []  # keys of entries whose tensor was collected

    def __len__(self) -> int:
        with self._lock:
            self._drop_collected()
            return len(self._entries)

    def key(self, op: str, args: Sequence) -> tuple | None:
        """The key of a call, or None when the cache is off or an argument has no key."""
        if self.limit <= 0:
            return None
        parts: list = [op, get_soc_name(), get_contract()]
        for arg in args:
            kind = type(arg)
            if kind is aclTensor:
                if arg.region is not None and arg.region.borrowed:
                    return None  # the functional API's tensor of one call: never repeated
                parts.append(id(arg))
            elif kind is aclIntArray:
                parts.append((kind, arg.values))
            elif kind in _SCALARS:
                parts.append((kind, repr(arg)))
            else:
                return None
        return tuple(parts)

    def lookup(self, key: tuple, args: Sequence):
        """(steps, workspace size, plan tensors) cached for this call, or None."""
        with self._lock:
            self._drop_collected()
            entry = self._entries.pop(key, None)
            if entry is None:
                return None
            self._entries[key] = entry  # most recently used last
        tensors = iter(entry.tensors)
        for arg in args:
            if type(arg) is aclTensor:
                if next(tensors)() is not arg or not arg.is_live():
                    return None
            elif type(arg) is aclIntArray and arg.destroyed:
                return None
        return entry.steps, entry.workspace_size, tuple(args[i] for i in entry.tensor_positions)

    def store(self, key: tuple, args: Sequence, steps, workspace_size: int,
              plan_tensors: Sequence[aclTensor]) -> None:
        """Remember a successful phase 1 (not one whose plan holds tensors it was not given)."""
        ids = [id(a) for a in args]
        if any(id(t) not in ids for t in plan_tensors):
            return
        positions = tuple(ids.index(id(t)) for t in plan_tensors)
        tensors = [a for a in args if type(a) is aclTensor]
        regions = tuple({id(t.region): t.region for t in tensors if t.region is not None}
                        .values())
        collected = self._collected

        def on_collected(_ref) -> None:
            collected.append(key)

        entry = _Entry(tuple(steps), workspace_size, positions,
                       tuple(weakref.ref(t, on_collected) for t in tensors), regions)
        with self._lock:
            self._drop_collected()
            self._drop(key)
            self._entries[key] = entry
            for region in regions:
                self._keys_by_region.setdefault(id(region), set()).add(key)
            while len(self._entries) > self.limit:
                self._drop(next(iter(self._entries)))

    def drop_region(self, region: _memory.Region) -> None:
        """Forget every entry that refers to `region` (it was freed)."""
        with self._lock:
            for key in list(self._keys_by_region.get(id(region), ())):
                self._drop(key)

    def clear(self) -> None:
        """Forget every entry."""
        with self._lock:
            self._entries.clear()
            self._keys_by_region.clear()

    def _drop_collected(self) -> None:
        while self._collected:
            self._drop(self._collected.pop())

    def _drop(self, key: tuple) -> None:
        entry = self._entries.pop(key, None)
        if entry is None:
            return
        for region in entry.regions:
            keys = self._keys_by_region.get(id(region))
            if keys is not None:
                keys.discard(key)
                if not keys:
                    del self._keys_by_region[id(region)]


def _limit_from_environment() -> int:
    """ACLNN_CACHE_LIMIT, an int in [0, 10000000]; unset or anything else: the default."""
    text = os.environ.get("ACLNN_CACHE_LIMIT", "")
    try:
        value = int(text)
    except ValueError:
        return DEFAULT_LIMIT
    return value if 0 <= value <= 10_000_000 else DEFAULT_LIMIT


cache = PlanCache(_limit_from_environment())
_memory.release_listeners.append(cache.drop_region)


def configure(limit: int) -> None:
    """Set the entry limit in-process (0 turns the cache off) and empty the cache."""
    cache.limit = limit
    cache.clear()
