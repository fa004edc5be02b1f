"""Accepting connections without running out of file descriptors, and through errors that pass.

Every connection holds a file descriptor, and so does every file the gateway reads or writes. Were
it to accept all the connections that come (thousands of idle clients), it would have none left to
open a segment or even a topic's settings: produce and fetch would fail for every client. So it
serves at most ``connection_limit()`` connections at once, keeping a quarter of its open-files limit
(at least 128) for files; at the limit it stops accepting, as a Kafka broker does at
``max.connections``, and the clients that come meanwhile wait in the kernel's backlog until a
connection closes.

anyio's ``SocketListener.serve`` also ends at the first error ``accept`` raises, and the gateway
with it. An accept fails for reasons that pass: the process or the system is out of descriptors
anyway (EMFILE, ENFILE: files took more than the reserve, or other processes did) or of buffers
(ENOBUFS, ENOMEM); or a client's connection broke before it was taken (ECONNABORTED, EPROTO...).
The loop here logs, waits a moment when out of resources, and accepts again.
"""

from __future__ import annotations

import asyncio
import errno
import functools
import logging
import resource
import socket
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Final

import anyio
import anyio.abc
import anyio.lowlevel
from anyio.streams.stapled import MultiListener

__all__ = ["ResilientListener", "connection_limit"]

logger = logging.getLogger("adiskq.kafka")

# Out of a resource that a closing connection (or file) gives back: retry after a pause, not at
# once (the same accept would fail again at once and spin the loop).
_STARVED: Final = frozenset({errno.EMFILE, errno.ENFILE, errno.ENOBUFS, errno.ENOMEM})
_STARVED_PAUSE_SECONDS: Final = 0.05
_MIN_FILES_RESERVE: Final = 128


def connection_limit() -> int | None:
    """How many connections the gateway serves at once: its soft open-files limit less a quarter
    (at least 128) kept for files; None when the limit is unlimited."""
    soft, _hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft == resource.RLIM_INFINITY:
        return None
    return max(1, soft - max(_MIN_FILES_RESERVE, soft // 4))


class ResilientListener(anyio.abc.Listener[anyio.abc.SocketStream]):
    """The TCP listener (one socket, or several: ``MultiListener``) served by accept loops that keep
    at most ``limit`` connections open (None: no limit) and outlive the errors of one accept."""

    def __init__(
        self, listener: anyio.abc.Listener[anyio.abc.SocketStream], limit: int | None, *, raw_sockets: bool = False
    ) -> None:
        self.listener = listener
        # Hand the handler the accepted socket itself, not an AnyIO stream (asyncio only: the
        # gateway serves it with a protocol of its own, ``_asyncio_transport.py``).
        self.raw_sockets = raw_sockets
        nested = listener.listeners if isinstance(listener, MultiListener) else [listener]
        self._sockets: Sequence[anyio.abc.Listener[anyio.abc.SocketStream]] = nested
        self.limit = limit
        self._slots = None if limit is None else anyio.Semaphore(limit)

    async def serve(
        self, handler: Callable[[anyio.abc.SocketStream], Any], task_group: anyio.abc.TaskGroup | None = None
    ) -> None:
        """Accept on every socket until cancelled; each connection runs ``handler`` in ``task_group``."""
        async with anyio.create_task_group() as accepting:
            for listener in self._sockets:
                accepting.start_soon(self._accept_forever, listener, handler, task_group or accepting)

    async def aclose(self) -> None:
        await self.listener.aclose()

    @property
    def extra_attributes(self) -> Mapping[Any, Callable[[], Any]]:
        return self.listener.extra_attributes

    async def _accept_forever(
        self,
        listener: anyio.abc.Listener[anyio.abc.SocketStream],
        handler: Callable[[anyio.abc.SocketStream], Any],
        task_group: anyio.abc.TaskGroup,
    ) -> None:
        accept = getattr(listener, "accept")  # noqa: B009 (anyio's socket listeners have it; Listener does not say so)
        if self.raw_sockets:
            listening = listener.extra(anyio.abc.SocketAttribute.raw_socket)  # noqa: S610 (anyio, not Django)
            accept = functools.partial(_accept_socket, listening)
        refused = 0  # accepts refused for want of descriptors since the last one that succeeded
        while True:
            await self._take_slot()
            try:
                stream = await _accept(accept)
            except OSError as error:
                self._give_slot()
                if error.errno not in _STARVED:
                    logger.info("adiskq: accepting a Kafka client failed (%s); accepting the next", error)
                    await anyio.lowlevel.checkpoint()
                    continue
                if refused == 0:
                    logger.warning(
                        "adiskq: cannot accept more Kafka clients (%s); the served connections go on, new ones "
                        "wait until a connection or file closes (raise the open-files limit, ulimit -n)",
                        error.strerror or error,
                    )
                refused += 1
                await anyio.sleep(_STARVED_PAUSE_SECONDS)
                continue
            except BaseException:
                self._give_slot()
                raise
            if refused:
                logger.warning("adiskq: accepting Kafka clients again, after %d refused accepts", refused)
                refused = 0
            task_group.start_soon(self._serve_one, handler, stream)

    async def _serve_one(
        self, handler: Callable[[anyio.abc.SocketStream], Any], stream: anyio.abc.SocketStream
    ) -> None:
        try:
            await handler(stream)
        finally:
            self._give_slot()

    async def _take_slot(self) -> None:
        slots = self._slots
        if slots is None:
            return
        if slots.value == 0:
            logger.warning(
                "adiskq: serving %d Kafka connections, the most its open-files limit leaves room for; new "
                "clients wait until one closes (raise the open-files limit, ulimit -n, to serve more)",
                self.limit,
            )
            await slots.acquire()
            logger.warning("adiskq: a Kafka connection closed; accepting clients again")
        else:
            await slots.acquire()

    def _give_slot(self) -> None:
        if self._slots is not None:
            self._slots.release()


async def _accept_socket(listening: socket.socket) -> socket.socket:
    """One accepted connection's socket (asyncio: the running loop's accept)."""
    client, _address = await asyncio.get_running_loop().sock_accept(listening)
    return client


async def _accept(accept: Callable[[], Any]) -> anyio.abc.SocketStream:
    """One accepted connection; an accept's failure as the OSError it is (on Trio, anyio wraps it
    in BrokenResourceError)."""
    try:
        stream: anyio.abc.SocketStream = await accept()
    except anyio.BrokenResourceError as broken:
        if isinstance(broken.__cause__, OSError):
            raise broken.__cause__ from None
        raise
    return stream
