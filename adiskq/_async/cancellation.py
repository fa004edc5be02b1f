"""Cancellation for the producer: is one waiting for the running task (asked without awaiting
anything)? (The wait no cancellation cuts short, on asyncio, is ``steadfast.SteadfastFuture``.)

``push`` must raise if its task's cancel scope was cancelled before it started (it is a checkpoint),
but a push that goes inline never yields, so the question is asked on every push. anyio's public
answer, ``scope_cancelled`` here, is slow for that; each event loop's implementation of the
interface in ``event_loop.py`` (``asyncio_loop.py``, ``trio_loop.py``) asks it fast, and falls back
to this one where its loop's state is not found as expected. The caller awaits anyio's real
checkpoint only when the check says a cancellation is waiting, so the exception and its delivery
are anyio's own. ``tests/async/test_cancellation_check.py`` holds each fast check to anyio's public
answer in every arrangement of scopes.
"""

from __future__ import annotations

import math
from collections.abc import Awaitable, Callable

import anyio

from .event_loop import running_loop, running_on_trio

__all__ = ["cancel_check", "loop_turn", "running_on_trio", "scope_cancelled", "shielded_turn"]


def scope_cancelled() -> bool:
    """Whether an anyio cancel scope around the calling task is cancelled (anyio's public answer,
    slower than ``cancel_check``'s; it also tells an anyio scope's cancellation from asyncio's own)."""
    return anyio.current_effective_deadline() == -math.inf


def cancel_check() -> Callable[[], bool]:
    """A function for the running event loop that says whether the calling task's next checkpoint
    would raise a cancellation (``EventLoop.cancel_pending``). Call it from a task of the loop it
    was made in."""
    return running_loop().cancel_pending


def loop_turn() -> Callable[[], Awaitable[None]]:
    """For the running event loop: let the loop's other tasks run once, at the least cost
    (``EventLoop.loop_turn``)."""
    return running_loop().loop_turn


def shielded_turn() -> Callable[[], Awaitable[None]]:
    """For the running event loop: let the loop's other tasks run once, delivering no cancellation
    (``EventLoop.shielded_turn``)."""
    return running_loop().shielded_turn
