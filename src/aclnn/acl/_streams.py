"""Streams: in-order queues of work.

Enqueuing returns at once; the queued work runs, in order, when the stream is
synchronized (by whichever thread synchronizes it). So a result read before
`synchronize_stream` is not there yet - exactly the rule the real device imposes, made
visible. Different streams drain independently, and kernels release the GIL, so streams
synchronized from different threads run concurrently.
"""

from __future__ import annotations

import itertools
import threading
from collections import deque
from collections.abc import Callable

from ._codes import ACL_ERROR_RT_INTERNAL_ERROR, ACL_SUCCESS


class TaskError(Exception):
    """Raised by a queued task to fail with a specific status and message."""

    def __init__(self, status: int, message: str):
        super().__init__(message)
        self.status = status
        self.message = message


class Stream:
    """One in-order queue; `handle` is the integer users hold. Every task gets a ticket;
    a synchronize covers the tickets handed out before it was called."""

    def __init__(self, handle: int):
        self.handle = handle
        self._tasks: deque[tuple[int, Callable[[], None]]] = deque()
        self._next_ticket = 0
        self._queue_lock = threading.Lock()
        self._drain_lock = threading.Lock()
        self._errors: deque[tuple[int, int, str]] = deque()  # (ticket, status, message)

    def enqueue(self, task: Callable[[], None]) -> None:
        """Append `task` to the queue."""
        with self._queue_lock:
            self._tasks.append((self._next_ticket, task))
            self._next_ticket += 1

    def synchronize(self) -> tuple[int, str]:
        """Run, in order, every task enqueued before this call (not those enqueued while it
        runs: another thread's stream traffic cannot keep it waiting); the first failure
        among them (status, message), which is then cleared."""
        with self._queue_lock:
            last = self._next_ticket - 1
        with self._drain_lock:
            while True:
                with self._queue_lock:
                    if not self._tasks or self._tasks[0][0] > last:
                        break
                    ticket, task = self._tasks.popleft()
                self._run(ticket, task)
            first = None
            while self._errors and self._errors[0][0] <= last:
                error = self._errors.popleft()
                first = first or error
        return (first[1], first[2]) if first else (ACL_SUCCESS, "")

    def _run(self, ticket: int, task: Callable[[], None]) -> None:
        try:
            task()
        except TaskError as exc:
            self._errors.append((ticket, exc.status, exc.message))
        except Exception as exc:  # a failing kernel must become a status, never a crash
            self._errors.append((ticket, ACL_ERROR_RT_INTERNAL_ERROR,
                                 f"task failed: {type(exc).__name__}: {exc}"))


class StreamTable:
    """The live streams by handle, and the default stream (handle None or 0)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._ids = itertools.count(1)
        self._streams: dict[int, Stream] = {}
        self.default = Stream(0)

    def create(self) -> Stream:
        stream = Stream(next(self._ids))
        with self._lock:
            self._streams[stream.handle] = stream
        return stream

    def get(self, handle) -> Stream | None:
        if handle is None or (type(handle) is int and handle == 0):
            return self.default
        if type(handle) is not int:
            return None
        with self._lock:
            return self._streams.get(handle)

    def remove(self, handle) -> Stream | None:
        if type(handle) is not int or handle == 0:
            return None
        with self._lock:
            return self._streams.pop(handle, None)

    def all(self) -> list[Stream]:
        with self._lock:
            return [self.default, *self._streams.values()]


streams = StreamTable()
