"""Runtime-owned memory: "device" allocations and registered host regions.

Every byte the library reads or writes belongs to a `Region` found here: a device
allocation made by `malloc`, a host allocation made by `malloc_host`, or a host NumPy
array whose address was handed out by `numpy_to_ptr`. An address that falls in no live
region is refused, so nothing ever touches memory it does not own. The functional API
also lends an array's own bytes to one call (`borrowed_region`); such a region belongs to
no heap and no address lookup finds it.
"""

from __future__ import annotations

import bisect
import os
import threading
import weakref
from collections.abc import Callable

import numpy as np

ALIGNMENT = 64


class Region:
    """A contiguous byte range `[addr, addr + size)` backed by a NumPy uint8 array;
    `borrowed`: lent by an array for one call (see `borrowed_region`)."""

    __slots__ = ("addr", "size", "buffer", "alive", "borrowed")

    def __init__(self, buffer: np.ndarray, borrowed: bool = False):
        self.buffer = buffer
        self.addr = int(buffer.ctypes.data)
        self.size = int(buffer.nbytes)
        self.alive = True
        self.borrowed = borrowed

    def contains(self, addr: int, nbytes: int) -> bool:
        """Whether `[addr, addr + nbytes)` lies inside this live region."""
        return self.alive and self.addr <= addr and addr + nbytes <= self.addr + self.size

    def bytes_at(self, addr: int, nbytes: int) -> np.ndarray:
        """A uint8 view of `[addr, addr + nbytes)`; the caller checked `contains`."""
        start = addr - self.addr
        return self.buffer[start : start + nbytes]


class _Span:
    """Exposes `nbytes` bytes at `addr` to NumPy as uint8, keeping `owner` alive. The bytes
    are typed writeable even for a read-only owner (one kernel signature serves every
    operand); the functional API writes only outputs it has checked are writeable."""

    def __init__(self, owner: np.ndarray | None, addr: int, nbytes: int):
        self.owner = owner
        self.__array_interface__ = {"version": 3, "typestr": "|u1", "shape": (nbytes,),
                                    "data": (addr, False)}


def byte_span(array: np.ndarray) -> tuple[int, int]:
    """(lowest address, byte count) of the memory a non-empty strided array touches."""
    low = high = int(array.ctypes.data)
    for size, stride in zip(array.shape, array.strides):
        if stride < 0:
            low += (size - 1) * stride
        else:
            high += (size - 1) * stride
    return low, high - low + array.itemsize


def borrowed_region(array: np.ndarray) -> Region:
    """A Region over the bytes a non-empty (strided) array spans, sharing its memory and
    keeping it alive."""
    low, nbytes = byte_span(array)
    return Region(np.asarray(_Span(array, low, nbytes)), borrowed=True)


def raw_host_region(addr: int, nbytes: int) -> Region:
    """A Region over `nbytes` of host memory at `addr` that no heap owns: a C program's own
    memory (malloc, the stack, std::vector), which the program vouches for."""
    return Region(np.asarray(_Span(None, addr, nbytes)), borrowed=True)


def _aligned_buffer(size: int) -> np.ndarray:
    raw = np.empty(size + ALIGNMENT, dtype=np.uint8)
    shift = (-raw.ctypes.data) % ALIGNMENT
    return raw[shift : shift + size]


def _physical_memory() -> int:
    try:
        return os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (ValueError, OSError, AttributeError):  # not POSIX: no limit of our own
        return 2**62


class MemoryBudget:
    """How much the runtime may allocate in all (device and host allocations together):
    a share of the machine's physical memory, so an allocation that cannot be backed fails
    with a status instead of the process being killed when the memory is touched."""

    SHARE = 0.8

    def __init__(self, capacity: int) -> None:
        self.capacity = capacity
        self.in_use = 0
        self._lock = threading.Lock()

    def reserve(self, size: int) -> None:
        """Count `size` more bytes in use, or raise MemoryError if they do not fit."""
        with self._lock:
            if self.in_use + size > self.capacity:
                raise MemoryError(f"the runtime's memory budget has {self.capacity - self.in_use} "
                                  f"of {self.capacity} bytes free")
            self.in_use += size

    def give_back(self, size: int) -> None:
        """Count `size` bytes as free again."""
        with self._lock:
            self.in_use -= size


budget = MemoryBudget(int(MemoryBudget.SHARE * _physical_memory()))

# Called with each region a heap releases, after it is marked dead: layers above that keep
# references to allocations (the aclnn plan cache) drop them here, so that freed memory is
# really returned.
release_listeners: list[Callable[[Region], None]] = []


# Freed device allocations of at least SPARE_MIN bytes, up to DEVICE_SPARE_LIMIT in all,
# are kept for the next allocation of the same size (a workspace allocated and freed
# around every call, as the CANN samples do): a fresh one costs an mmap and its release an
# munmap, 124 and 67 us for AvgPool2dBackward's 231 MB workspace right after a call had
# streamed through memory (a 10 ms pause before each, as the benchmark times), where
# reusing one took 53 and 19 us (Python's own cost, its caches cold), 3.5 % of that call;
# 128 + 103 against 55 + 34 us for a transposed self's 32 MB. Host allocations are not kept.
SPARE_MIN = 1 << 20
DEVICE_SPARE_LIMIT = 256 << 20


class _Heap:
    """Live allocations of one side (device or host), searchable by any address inside them,
    and the spare buffers of freed ones (see SPARE_MIN)."""

    def __init__(self, spare_limit: int = 0) -> None:
        self._lock = threading.Lock()
        self._starts: list[int] = []
        self._regions: dict[int, Region] = {}
        self._spare_limit = spare_limit
        self._spares: dict[int, list[np.ndarray]] = {}  # size -> freed buffers of that size

    def allocate(self, size: int) -> Region:
        """A new region of `size` bytes; MemoryError beyond the budget or the machine. A
        spare buffer of that size is reused; a large size without one lets every spare go
        first (the memory may be needed)."""
        budget.reserve(size)
        try:
            buffer = self._spare(size)
            region = Region(_aligned_buffer(size) if buffer is None else buffer)
        except BaseException:
            budget.give_back(size)
            raise
        with self._lock:
            bisect.insort(self._starts, region.addr)
            self._regions[region.addr] = region
        return region

    def _spare(self, size: int) -> np.ndarray | None:
        with self._lock:
            kept = self._spares.get(size)
            if kept:
                return kept.pop()
            if size >= SPARE_MIN:
                self._spares.clear()
        return None

    def spare_bytes(self) -> int:
        """The bytes of the spare buffers kept (the caller holds the lock, or reads a
        snapshot)."""
        return sum(size * len(kept) for size, kept in self._spares.items())

    def release(self, addr: int) -> Region | None:
        """Free the region at `addr` (None if there is none): marked dead, so that nothing
        reaches its bytes through it again, its buffer kept as a spare where it may be."""
        with self._lock:
            region = self._regions.pop(addr, None)
            if region is None:
                return None
            self._starts.pop(bisect.bisect_left(self._starts, addr))
            if SPARE_MIN <= region.size <= self._spare_limit - self.spare_bytes():
                self._spares.setdefault(region.size, []).append(region.buffer)
        region.alive = False
        region.buffer = None
        budget.give_back(region.size)
        for listener in release_listeners:
            listener(region)
        return region

    def find(self, addr: int, nbytes: int = 0) -> Region | None:
        with self._lock:
            i = bisect.bisect_right(self._starts, addr) - 1
            if i < 0:
                return None
            region = self._regions[self._starts[i]]
        return region if region.contains(addr, nbytes) else None

    def overlaps(self, addr: int, nbytes: int) -> bool:
        """Whether `[addr, addr + nbytes)` shares a byte with a live region (regions never
        overlap, so only the last one starting before the range's end can)."""
        with self._lock:
            i = bisect.bisect_left(self._starts, addr + max(nbytes, 1)) - 1
            if i < 0:
                return False
            region = self._regions[self._starts[i]]
        return region.addr + region.size > addr

    def release_all(self) -> None:
        """Free every region, and let the spares go."""
        with self._lock:
            addrs = list(self._starts)
        for addr in addrs:
            self.release(addr)
        with self._lock:
            self._spares.clear()


def _bytes_of(array: np.ndarray) -> np.ndarray:
    """The bytes of a contiguous array, in memory order, as a uint8 view."""
    return np.ravel(array, order="K").view(np.uint8) if array.size else np.empty(0, np.uint8)


class _HostRegistry:
    """Host NumPy arrays whose addresses were handed out, held weakly: an entry dies with
    its array (the registry never keeps an array alive). Registering a live array again
    adds nothing; dead entries are swept by later registrations, so the table stays
    proportional to the live arrays. Lookups by an array's own address (what numpy_to_ptr
    returns) take constant time."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._entries: dict[int, list[tuple[weakref.ref, int]]] = {}  # start -> (array, size)
        self._count = 0
        self._sweep_at = 64

    def register(self, array: np.ndarray) -> int:
        addr = int(array.ctypes.data)
        with self._lock:
            at_addr = self._entries.setdefault(addr, [])
            if any(ref() is array for ref, _ in at_addr):
                return addr
            at_addr.append((weakref.ref(array), int(array.nbytes)))
            self._count += 1
            if self._count >= self._sweep_at:
                self._sweep()
        return addr

    def _sweep(self) -> None:
        for addr in list(self._entries):
            live = [entry for entry in self._entries[addr] if entry[0]() is not None]
            if live:
                self._entries[addr] = live
            else:
                del self._entries[addr]
        self._count = sum(map(len, self._entries.values()))
        self._sweep_at = max(64, 2 * self._count)

    def find(self, addr: int, nbytes: int = 0) -> Region | None:
        with self._lock:
            candidates = [(addr, entry) for entry in self._entries.get(addr, ())]
            if not any(nbytes <= size for _, (_, size) in candidates):
                candidates = [(start, entry) for start, entries in self._entries.items()
                              for entry in entries]
        for start, (ref, size) in reversed(candidates):
            if start <= addr and addr + nbytes <= start + size:
                array = ref()
                if array is not None:
                    region = Region(_bytes_of(array))
                    region.addr = start
                    return region
        return None

    def clear(self) -> None:
        with self._lock:
            self._entries = {}
            self._count = 0


device_heap = _Heap(DEVICE_SPARE_LIMIT)
host_heap = _Heap()
host_arrays = _HostRegistry()


def find_host(addr: int, nbytes: int) -> Region | None:
    """The live host region (malloc_host or numpy_to_ptr) holding `[addr, addr+nbytes)`."""
    return host_heap.find(addr, nbytes) or host_arrays.find(addr, nbytes)


def find_any(addr: int, nbytes: int) -> Region | None:
    """The live region of either side holding `[addr, addr + nbytes)`."""
    return device_heap.find(addr, nbytes) or find_host(addr, nbytes)
