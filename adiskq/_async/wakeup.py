"""In-process wake-ups: a producer tells consumers in its own process that a partition grew.

This skips the kernel (inotify) for the common case of a consumer beside its producer. Both sides
name a partition by ``(os.path.realpath(stream), partition)``. A waiter is an ``anyio.Event`` of the
waiting task's event loop; producers and consumers running in *different* event loops (threads) of
one process do not wake each other through here, and rely on inotify instead.
"""

from __future__ import annotations

import anyio

__all__ = ["PartitionKey", "add_waiter", "notify", "remove_waiter"]

PartitionKey = tuple[str, int]

_waiters: dict[PartitionKey, list[anyio.Event]] = {}


def notify(key: PartitionKey) -> None:
    """Wake every task waiting on the partition; called after each commit, so it is cheap when idle."""
    waiters = _waiters.pop(key, None)
    if waiters:
        for event in waiters:
            event.set()


def add_waiter(key: PartitionKey) -> anyio.Event:
    """An event that is set at the next commit to the partition."""
    event = anyio.Event()
    _waiters.setdefault(key, []).append(event)
    return event


def remove_waiter(key: PartitionKey, event: anyio.Event) -> None:
    """Stop waiting (the waiter was cancelled or woken another way)."""
    waiters = _waiters.get(key)
    if waiters is None:
        return
    try:
        waiters.remove(event)
    except ValueError:
        return
    if not waiters:
        del _waiters[key]
