"""Giving the C heap's free memory back to the system after clients that made the gateway buffer.

A client that pipelines Fetches and never reads makes the gateway hold answers (megabytes each)
until the request timeout closes the connection. Python frees them, but glibc's allocator keeps the
freed heap for later: after a large buffer is freed, its threshold for serving a request from
``mmap`` rises, so the next large answers come from the heap too, and the heap grows with each such
burst without shrinking (56 to 215 MB over seven bursts of twenty such clients). ``malloc_trim``
hands the free pages back. It is called (in a worker thread: it walks the heap), after a collection
of cyclic garbage, once the connections of such a burst have closed; elsewhere than glibc there is
nothing to call.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import gc
import time
from collections.abc import Callable
from typing import Final

import anyio.to_thread

__all__ = ["MemoryReturn"]

_QUIET_SECONDS: Final = 0.25
_MAX_WAIT_SECONDS: Final = 2.0


def _malloc_trim() -> Callable[[int], int] | None:
    """glibc's ``malloc_trim``, or None where the C library has none."""
    name = ctypes.util.find_library("c")
    if name is None:
        return None
    try:
        trim = ctypes.CDLL(name).malloc_trim  # ctypes releases the GIL for the call
    except (OSError, AttributeError):
        return None
    trim.argtypes = [ctypes.c_size_t]
    trim.restype = ctypes.c_int
    return trim


def _collect_and_trim(trim: Callable[[int], int]) -> None:
    # A connection cancelled in a send (Trio's stalled client) leaves its answer referenced from the
    # cancellation's traceback frames, a cycle only the cyclic collector frees: collect, then trim.
    gc.collect()
    trim(0)


class MemoryReturn:
    """Trims the C heap once connections that backed up have closed: when none has closed for a
    quarter of a second (the clients of a burst close together, and each frees its answers only as
    it closes), or two seconds after the first of them, whichever comes first."""

    def __init__(self) -> None:
        self._trim = _malloc_trim()
        self._last_close = -float("inf")
        self._waiting = False

    async def after_backed_up_connection(self) -> None:
        """A connection that held answers its client did not take has closed: give the freed heap
        back once its burst has closed (the first such connection's task waits for that)."""
        trim = self._trim
        if trim is None:
            return
        self._last_close = first = time.monotonic()
        if self._waiting:
            return  # the task already waiting trims for this one too
        self._waiting = True
        try:
            while True:
                now = time.monotonic()
                if now - self._last_close >= _QUIET_SECONDS or now - first >= _MAX_WAIT_SECONDS:
                    trimming = time.monotonic()
                    with anyio.CancelScope(shield=True):
                        await anyio.to_thread.run_sync(_collect_and_trim, trim)
                    if self._last_close < trimming:
                        return
                    first = time.monotonic()  # connections closed meanwhile: once more for them
                await anyio.sleep(_QUIET_SECONDS)
        finally:
            self._waiting = False
