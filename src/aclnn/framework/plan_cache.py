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

import operator
import os
import threading
import weakref
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from ..acl import _memory, get_contract, get_soc_name
from ..tensor import aclIntArray, aclTensor

DEFAULT_LIMIT = 10000
_SCALARS = (int, bool, str, type(None))  # keyed by their value (and type); floats apart


@dataclass(frozen=True)
class _Entry:
    steps: tuple
    workspace_size: int
    plan_tensors: Callable[[Sequence], tuple]       # the plan's tensors among the arguments
    tensors: tuple[tuple[int, weakref.ref], ...]    # (argument position, its tensor)
    int_arrays: tuple[int, ...]                     # argument positions of int arrays
    regions: tuple                                  # the tensors' allocations (strong:
                                                    # keeps the ids stable)


def _picker(positions: tuple[int, ...]) -> Callable[[Sequence], tuple]:
    """A function taking the items at `positions` of a sequence, as a tuple."""
    if len(positions) > 1:
        return operator.itemgetter(*positions)
    return lambda args: tuple(args[i] for i in positions)


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
        """The key of a call, or None when the cache is off or an argument has no key: the
        operator, SoC and contract, the arguments' types, then each argument's identity
        (tensors) or value (a zero float by its text, which tells -0.0 from 0.0)."""
        if self.limit <= 0:
            return None
        parts: list = [op, get_soc_name(), get_contract(), *map(type, args)]
        for arg in args:
            kind = type(arg)
            if kind is aclTensor:
                if arg.region is not None and arg.region.borrowed:
                    return None  # the functional API's tensor of one call: never repeated
                parts.append(id(arg))
            elif kind is float:
                parts.append(arg if arg else repr(arg))  # -0.0 == 0.0, but not its plan
            elif kind in _SCALARS:
                parts.append(arg)
            elif kind is aclIntArray:
                parts.append(arg.values)
            else:
                return None
        return tuple(parts)

    def lookup(self, key: tuple, args: Sequence):
        """(steps, workspace size, plan tensors) cached for this call, or None. The lock is
        taken by acquire/release, not `with`: this is a repeated call's hot path, and
        `with` on a lock cost 0.3 us more (Python 3.11, a 2 GHz AMD EPYC)."""
        lock = self._lock
        lock.acquire()
        try:
            if self._collected:
                self._drop_collected()
            entry = self._entries.pop(key, None)
            if entry is None:
                return None
            self._entries[key] = entry  # most recently used last
        finally:
            lock.release()
        # `aclTensor.is_live` written out, and the plan's tensors taken by `_picker`
        # (itemgetter): 1.5 us less a call than is_live and map(args.__getitem__, ...)
        for position, ref in entry.tensors:
            arg = args[position]
            if ref() is not arg or arg.destroyed or (
                    arg.region is not None and not arg.region.alive):
                return None
        for position in entry.int_arrays:
            if args[position].destroyed:
                return None
        return entry.steps, entry.workspace_size, entry.plan_tensors(args)

    def store(self, key: tuple, args: Sequence, steps, workspace_size: int,
              plan_tensors: Sequence[aclTensor]) -> None:
        """Remember a successful phase 1 (not one whose plan holds tensors it was not given)."""
        ids = [id(a) for a in args]
        if any(id(t) not in ids for t in plan_tensors):
            return
        positions = tuple(ids.index(id(t)) for t in plan_tensors)
        tensors = [(i, a) for i, a in enumerate(args) if type(a) is aclTensor]
        regions = tuple({id(t.region): t.region for _, t in tensors if t.region is not None}
                        .values())
        collected = self._collected

        def on_collected(_ref) -> None:
            collected.append(key)

        entry = _Entry(tuple(steps), workspace_size, _picker(positions),
                       tuple((i, weakref.ref(t, on_collected)) for i, t in tensors),
                       tuple(i for i, a in enumerate(args) if type(a) is aclIntArray), regions)
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
