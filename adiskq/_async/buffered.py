"""The last batch's messages for ``async for``, handed out one per step.

The compiled core's ``Buffer`` (``adiskq/_csrc/log/buffered.c``) hands out a buffered message without
running any Python: its ``__anext__`` returns an awaitable that gives the message at once. This is
the same object in Python, for the pure-Python core. Either way, with nothing buffered (or once
closed) ``__anext__`` awaits ``refill()``: the reader's coroutine that reads the next batch (or waits
for one), calls ``set()`` with it and returns its first message, or raises ``StopAsyncIteration``
or ``ClosedError``.
"""

from __future__ import annotations

import operator
from collections.abc import Awaitable, Callable
from typing import Generic, Self

from .._sansio import core
from .._sansio.values import KeyT, Message, ValueT

__all__ = ["MessageBuffer", "new_buffer"]


class MessageBuffer(Generic[KeyT, ValueT]):
    """Buffered messages and the index of the next; see the module's docstring."""

    __slots__ = ("_closed", "_index", "_items", "_refill")

    def __init__(self, refill: Callable[[], Awaitable[Message[KeyT, ValueT]]]) -> None:
        self._items: list[Message[KeyT, ValueT]] = []
        self._index = 0
        self._refill = refill
        self._closed = False

    def __aiter__(self) -> Self:
        return self

    async def __anext__(self) -> Message[KeyT, ValueT]:
        items, index = self._items, self._index
        if index < len(items) and not self._closed:
            self._index = index + 1
            return items[index]
        return await self._refill()

    def set(self, items: list[Message[KeyT, ValueT]], index: int = 0) -> None:
        """The buffer is now these messages, handing out from ``index`` on."""
        self._items = items
        self._index = max(0, index)

    def take(self, most: int) -> list[Message[KeyT, ValueT]] | None:
        """Up to ``most`` buffered messages (handed out), or None when none are buffered."""
        most = operator.index(most)
        if most < 0:  # it would move the index back before messages already handed out
            raise ValueError(f"take(most): most is a count of 0 or more, not {most}")
        items, index = self._items, self._index
        if index >= len(items):
            return None
        taken = items[index : index + most]
        self._index = index + len(taken)
        return taken

    def clear(self) -> None:
        """Drop the buffered messages."""
        self._items = []
        self._index = 0

    def close(self) -> None:
        """Drop them, and send every later ``__anext__`` to ``refill()``."""
        self._closed = True
        self.clear()

    @property
    def remaining(self) -> int:
        """Messages buffered and not yet handed out."""
        return max(0, len(self._items) - self._index)


def new_buffer(refill: Callable[[], Awaitable[Message[KeyT, ValueT]]]) -> MessageBuffer[KeyT, ValueT]:
    """A buffer of the core in use: the compiled one, or the class above."""
    if core.Buffer is not None:
        return core.Buffer(refill)  # type: ignore[no-any-return]  # the same interface, in C
    return MessageBuffer(refill)
