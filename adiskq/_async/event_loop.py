"""The event loop a producer runs on, chosen once when it opens: one interface, an implementation each.

asyncio and Trio differ in what the producer's hot paths ask of them: whether a cancellation waits
for the running task (asked without awaiting, on every push), how to give the loop one turn at the
least cost (with a cancellation delivered there, or shielded from it), how to run a callback at the
loop's next turn (from its thread, or from any), and how to hand a short blocking call to a worker
thread without abandoning it. Each is a member of ``EventLoop``; ``running_loop()`` asks once which
loop runs and builds its implementation (``asyncio_loop.py``, ``trio_loop.py``), so the code that
uses them never asks again.

A consumer's ``Waiter`` (``wakeup.py``) waits the same way in either loop but with that loop's own
parts: its event (a bare future on asyncio, a ``trio.Event`` on Trio), how another thread wakes it,
and how it sleeps on the inotify descriptor (``notify.py``: the loop reads it in a callback on
asyncio, a waiting task reads it on Trio). Those are ``Waits``, chosen by ``waits_in(token)`` when a
waiter first arms in a loop (``asyncio_waits.py``, ``trio_waits.py``). The implementations, and
this module's questions, are the only places below the API where a loop is imported or looked up
(``tests/test_layers.py``).
"""

from __future__ import annotations

import sys
from collections.abc import Awaitable, Callable, Coroutine
from types import ModuleType
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

if TYPE_CHECKING:
    import asyncio

    import anyio

    from .notify import Notifier
    from .steadfast import SteadfastFuture
    from .wakeup import Waiter

    # For annotations of modules that import no loop (the Kafka gateway parks a fetch on it).
    AsyncioLoop = asyncio.AbstractEventLoop

__all__ = ["EventLoop", "RunInThread", "Waits", "running_loop", "running_on_trio", "waits_in"]

T = TypeVar("T")


class RunInThread(Protocol):
    """``await run_in_thread(function, limiter)``: ``function()`` in a worker thread, holding one of
    ``limiter``'s tokens; its result or its error. The wait is not abandoned on cancellation (a
    batch's fdatasync must finish, and be reported): a cancellation meanwhile is delivered at the
    caller's next checkpoint, after the call has returned. The call runs without the caller's
    context variables: pass only calls that need none."""

    def __call__(self, function: Callable[[], T], limiter: anyio.CapacityLimiter, /) -> Awaitable[T]: ...


class EventLoop:
    """What the producer asks of its event loop, each member a plain callable (no dispatch a call).

    ``cancel_pending()``: whether the calling task's next checkpoint would raise a cancellation
    (an anyio scope's, or Trio's). ``await loop_turn()``: the loop's other tasks run once; on asyncio
    a cancellation of the task may be delivered there, so the caller asks ``cancel_pending`` first
    and has written nothing. ``await shielded_turn()``: the same, delivering no cancellation (for a
    call that has written and must return). ``call_soon(callback)``: run ``callback`` at the loop's
    next turn (from the loop's thread); ``call_soon_threadsafe(callback)``: the same from any thread,
    dropped once the loop has ended (nobody is left to wake). ``run_in_thread``: see ``RunInThread``.

    A lane's batches wait differently on each (``lane.py`` says why): on asyncio a task leads each
    batch (``start_task``) and its pushes await a future nothing cancels (``new_batch_waiter()``),
    where ``cancelled_errors`` may still arrive, and a wait that may be cancelled ``shield``s it; on
    Trio a batch's first push leads it and the others park through ``lowlevel`` (``trio.lowlevel``)
    until it is finished, a wait ``cannot_abort`` leaves unaborted. The other loop's members are
    None (and ``cancelled_errors`` empty)."""

    __slots__ = (
        "call_soon",
        "call_soon_threadsafe",
        "cancel_pending",
        "cancelled_errors",
        "cannot_abort",
        "loop_turn",
        "lowlevel",
        "name",
        "new_batch_waiter",
        "run_in_thread",
        "shield",
        "shielded_turn",
        "start_task",
    )

    def __init__(
        self,
        name: str,
        *,
        cancel_pending: Callable[[], bool],
        loop_turn: Callable[[], Awaitable[None]],
        shielded_turn: Callable[[], Awaitable[None]],
        call_soon: Callable[[Callable[[], None]], None],
        call_soon_threadsafe: Callable[[Callable[[], None]], None],
        run_in_thread: RunInThread,
        new_batch_waiter: Callable[[], SteadfastFuture] | None = None,
        shield: Callable[[SteadfastFuture], Awaitable[None]] | None = None,
        start_task: Callable[[Coroutine[Any, Any, None]], asyncio.Task[None]] | None = None,
        cancelled_errors: tuple[type[BaseException], ...] = (),
        lowlevel: ModuleType | None = None,
        cannot_abort: Callable[[Callable[[], Any]], Any] | None = None,
    ) -> None:
        self.name = name
        self.cancel_pending = cancel_pending
        self.loop_turn = loop_turn
        self.shielded_turn = shielded_turn
        self.call_soon = call_soon
        self.call_soon_threadsafe = call_soon_threadsafe
        self.run_in_thread = run_in_thread
        self.new_batch_waiter = new_batch_waiter
        self.shield = shield
        self.start_task = start_task
        self.cancelled_errors = cancelled_errors
        self.lowlevel = lowlevel
        self.cannot_abort = cannot_abort


class Waits(Protocol):
    """How a ``Waiter`` waits in one event loop (an asyncio loop, a Trio run), chosen when it arms there.

    The waiter copies the callables it calls on every wake-up into its own slots (one attribute
    read, no dispatch): ``new_event()`` makes the event of one wait; ``set_event(waiter)`` ends the
    wait on the waiter's current event, if any (in the loop's thread; setting it twice is
    harmless); ``event_wait(event)`` is what a task awaits until it is set;
    ``call_soon_threadsafe(callback)`` runs ``callback`` in the loop from any thread, raising
    ``RuntimeError`` once the loop has ended. ``wait(...)`` is ``Notifier.wait`` in this loop.
    ``asyncio_loop`` is the asyncio loop, None on Trio (the Kafka gateway parks a fetch on it)."""

    asyncio_loop: AsyncioLoop | None

    def new_event(self) -> Any: ...

    def set_event(self, waiter: Waiter, /) -> None: ...

    def event_wait(self, event: Any, /) -> Awaitable[None]: ...

    def call_soon_threadsafe(self, callback: Callable[[], object], /) -> object: ...

    def wait(
        self, notifier: Notifier, waiter: Waiter, max_seconds: float, reads: bool
    ) -> Coroutine[Any, Any, None]: ...


def waits_in(native_token: object) -> Waits:
    """The ``Waits`` of the loop whose native token (``anyio.lowlevel.current_token().native_token``)
    is ``native_token``: an asyncio loop, or Trio's run token. A process on Trio never imports asyncio,
    so asyncio is looked up, not imported, to tell."""
    asyncio_module = sys.modules.get("asyncio")
    if asyncio_module is not None and isinstance(native_token, asyncio_module.AbstractEventLoop):
        from .asyncio_waits import AsyncioWaits

        return AsyncioWaits(native_token)
    from .trio_waits import TrioWaits

    return TrioWaits(native_token)


def running_loop() -> EventLoop:
    """The running event loop's implementation; call it from a task of that loop."""
    if running_on_trio():
        from .trio_loop import trio_loop

        return trio_loop()
    from .asyncio_loop import asyncio_loop

    return asyncio_loop()


def running_on_trio() -> bool:
    """Whether this runs in Trio's event loop (not asyncio's, nor outside any loop)."""
    trio = sys.modules.get("trio")  # never imported: not Trio (and Trio stays an optional extra)
    if trio is None:
        return False
    try:
        trio.lowlevel.current_task()
    except RuntimeError:
        return False
    return True
