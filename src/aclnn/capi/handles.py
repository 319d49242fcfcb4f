"""C handles of Python objects: what an `aclTensor *`, `aclOpExecutor *` or `aclrtStream`
holds on the C side.

A handle is an opaque pointer value that is never dereferenced: `BASE + 16 * serial`,
with serials never reused, so a destroyed handle can never come back naming a new
object. A lookup gives the live object; for a handle retired lately (destroyed, or an
executor that has run) the retired object itself, so the Python API answers with its own
message ("was destroyed", "has already run"); for anything else a `ForeignHandle`, which
every Python check rejects. Retired objects are kept in a bounded table (the newest
`retired_kept` at least, twice that at most), so a program that creates and destroys
objects forever uses bounded memory.
"""

from __future__ import annotations

import itertools

BASE = 0x0AC1 << 40  # far from the heap and the stack: a junk pointer rarely lands here
STEP = 16
RETIRED_KEPT = 4096


class ForeignHandle:
    """A pointer a C caller passed that names no object of this library."""

    __slots__ = ("value",)

    def __init__(self, value: int):
        self.value = value

    def __repr__(self) -> str:
        return f"<{self.value:#x}: not a live handle of this library>"


class _Live(dict):
    """Live objects by handle, with NULL (0) naming None; a missing handle is looked up
    among the retired (`lookup` is this dict's subscript: a hit costs no Python call)."""

    def __init__(self, table: HandleTable) -> None:
        super().__init__({0: None})
        self._table = table

    def __missing__(self, handle: int):
        found = self._table.retired.get(handle)
        return found if found is not None else ForeignHandle(handle)


class HandleTable:
    """Live objects by handle, and the objects retired lately. Safe from many threads: each
    step is one dict operation, atomic under the GIL."""

    def __init__(self, retired_kept: int = RETIRED_KEPT) -> None:
        self._serials = itertools.count(BASE + STEP, STEP)
        self._live = _Live(self)
        self.retired: dict[int, object] = {}
        self._retired_kept = retired_kept
        self.lookup = self._live.__getitem__
        """lookup(handle): the object of `handle`: None for NULL, the live or lately retired
        object, or a ForeignHandle."""

    def add(self, obj: object) -> int:
        """A new handle for `obj`."""
        handle = next(self._serials)
        self._live[handle] = obj
        return handle

    def retire(self, handle: int) -> None:
        """`handle` no longer names a live object (its object stays findable a while). The
        retired are a plain dict, in the order they retired, trimmed to the newest
        `retired_kept` when it holds twice that: an executor's retirement at every phase 2
        took 0.7 us more with an OrderedDict trimmed at each (a 2 GHz AMD EPYC)."""
        obj = self._live.pop(handle, None) if handle else None
        if obj is None:
            return
        retired = self.retired
        retired[handle] = obj
        if len(retired) > 2 * self._retired_kept:
            for old in list(itertools.islice(retired, len(retired) - self._retired_kept)):
                retired.pop(old, None)  # another thread may be trimming too

    def live_count(self) -> int:
        """How many handles are live."""
        return len(self._live) - 1
