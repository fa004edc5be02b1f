"""A plain-TCP connection on asyncio served from the socket's callbacks, without AnyIO's streams.

Every request costs the AnyIO stream path a receive and a send, each a checkpoint (a turn of the
event loop, a cancel scope entered and left) and a task switch: more than the gateway's own work
for a small Produce or Fetch. On asyncio the gateway therefore serves a plain TCP connection with
an ``asyncio.Protocol``: ``data_received`` feeds the framing (``wire/framing.py``) and answers each
whole request at once when its handler can (``answers_now`` in ``_registry.py``: a Produce the
producer writes inline, a Fetch with data at hand), writing the answer to the transport in the same
callback. A Fetch whose long poll waits for a producer of this process is parked (``Later.park``):
its wake-up answers it from a loop callback too, without the task's turns. Any other request that
has to wait (a long poll on inotify, an fsync, a group join, anything without a synchronous
handler), and a parked Fetch that a wake-up left short of ``min_bytes``, is handed to the
connection's task, which the gateway still runs per connection (so deadlines, shutdown and the
connection cap stay as they are); the callbacks take no further request until the parked request
or the task has answered, so answers keep the requests' order, as Kafka requires.

Back-pressure: a client that does not read its answers fills the transport's write buffer past
``WRITE_HIGH_BYTES``; the connection then stops answering and reading (the request timeout runs,
as for an answer the client does not take) until the buffer drains. While the task works on a
request, reading stops once ``READ_AHEAD_BYTES`` more have come.

TLS connections and every connection on Trio stay on the AnyIO stream path (``_server.py``): the
TLS record layer is AnyIO's, and Trio has no protocol callbacks.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from typing import Final

from ._core import Connection, GatewayCore
from ._deadlines import Deadline
from ._registry import Later
from ._security import raw_sasl_answer, raw_sasl_expected, should_close
from .wire.framing import Frames, FrameTooLargeError
from .wire.protocol import encode_error_response

__all__ = ["READ_AHEAD_BYTES", "WRITE_HIGH_BYTES", "ConnectionProtocol"]

logger = logging.getLogger("adiskq.kafka")

WRITE_HIGH_BYTES: Final = 256 << 10  # answers not yet taken by the client, before answering stops
READ_AHEAD_BYTES: Final = 1 << 20  # bytes of later requests read while one waits in the task
_MESSAGE_TOO_LARGE: Final = 10

AnswerNow = Callable[[Connection, bytes], "bytes | Later | None"]


class ConnectionProtocol(asyncio.Protocol):
    """One client connection: its framing, the answers given from the callbacks, and what it
    hands to its task (``run``)."""

    def __init__(
        self,
        core: GatewayCore,
        connection: Connection,
        deadline: Deadline,
        answer_now: AnswerNow,
        *,
        max_request_bytes: int,
        request_timeout: float,
        idle_timeout: float,
    ) -> None:
        self._core = core
        self._connection = connection
        self._deadline = deadline
        self._answer_now = answer_now
        self._frames = Frames(max_request_bytes)
        self._max_request_bytes = max_request_bytes
        self._request_timeout = request_timeout
        self._idle_timeout = idle_timeout
        self._transport: asyncio.Transport | None = None
        self._wakeup = asyncio.Event()  # the task has something to do (a request, or to stop)
        self._pending: Later | None = None  # the request the task is answering
        # Set while a request waits parked (``Later.park``): calls that wait off
        self._parked_off: Callable[[], None] | None = None
        self._failure: Exception | None = None  # what the callbacks raised: the task raises it
        self._stopped = False  # no more requests: closed by the client, failed, or to be closed
        self._writing_paused = False
        self._reading_paused = False
        self._refusing: int | None = None  # the size of a frame over max_request_bytes, being refused
        self._eof = False  # the client will send nothing more
        self.backed_up = False  # answers the client did not take filled the write buffer once
        # The wait for the first request (``Connection.silent``) is the shorter of the two timeouts.
        self._first_request_timeout = min(request_timeout, idle_timeout)

    # -- asyncio's callbacks ---------------------------------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self._transport = transport
        transport.set_write_buffer_limits(high=WRITE_HIGH_BYTES)
        self._deadline.arm(self._first_request_timeout, idle=True)

    def data_received(self, data: bytes) -> None:
        if self._stopped or self._deadline.expired is not None:
            return  # the task is ending the connection
        self._frames.feed(data)
        if self._writing_paused:
            return  # the deadline of the answers not taken runs on
        self._deadline.disarm()
        self._pump()

    def eof_received(self) -> bool:
        # The client has sent its last request: answer every whole one received, then close (the
        # answers still go out on the half-open connection, as the stream path sends them).
        self._eof = True
        self._pump()
        return True

    def connection_lost(self, exc: Exception | None) -> None:
        self._stop()

    def pause_writing(self) -> None:
        self._writing_paused = True
        self.backed_up = True
        self._pause_reading()
        self._deadline.arm(self._request_timeout, idle=False)  # an answer the client does not take

    def resume_writing(self) -> None:
        self._writing_paused = False
        if self._deadline.disarm():
            return
        self._pump()

    # -- the connection's task -------------------------------------------------------------------

    async def run(self) -> None:
        """Answer what the callbacks hand over, until the connection stops; raises what a request
        raised (a malformed one, one before authentication), for the gateway to log."""
        while True:
            await self._wakeup.wait()
            self._wakeup.clear()
            if self._failure is not None:
                raise self._failure
            pending = self._pending
            if pending is not None:
                answer = await pending.finish()
                self._pending = None
                if self._stopped:
                    return
                if answer is not None:
                    self._write(answer)
                if should_close(self._connection):
                    return  # a failed authentication: answered, then closed, as Kafka does
                self._pump()
                continue
            if self._stopped:
                return

    @property
    def connected(self) -> bool:
        """True once the transport has the socket (closing it is then the transport's job)."""
        return self._transport is not None

    def close(self, *, abort: bool) -> None:
        """Close the transport: at once (``abort``: a stalled client), or once what is written has
        gone out (at most ``request_timeout`` more)."""
        self._stopped = True
        self._unpark()
        transport = self._transport
        if transport is None or transport.is_closing():
            return
        if abort:
            transport.abort()
            return
        transport.close()
        if transport.get_write_buffer_size():
            asyncio.get_running_loop().call_later(self._request_timeout, transport.abort)

    # -- answering -------------------------------------------------------------------------------

    def _pump(self) -> None:
        """Answer the whole requests received, in order, until one has to wait for the task, none
        is left (then wait for the client, under its deadline), or the connection must stop."""
        if self._stopped or self._writing_paused:
            return
        if self._pending is not None or self._parked_off is not None:
            if self._frames.buffered_bytes > READ_AHEAD_BYTES:
                self._pause_reading()
            return
        frames, connection, core, answer_now = self._frames, self._connection, self._core, self._answer_now
        state, transport = connection.state, self._transport
        assert transport is not None  # data comes after connection_made
        try:
            while True:
                if core.closing:
                    self._stop()
                    return
                if self._refusing is not None:
                    self._refuse()
                    return
                try:
                    message = frames.next_frame()
                except FrameTooLargeError as too_large:
                    self._refusing = too_large.size
                    logger.warning(
                        "adiskq: Kafka client %s sent a request of %d bytes, over max_request_bytes=%d; "
                        "connection closed",
                        connection.peer,
                        too_large.size,
                        self._max_request_bytes,
                    )
                    continue
                if message is None:
                    if self._eof:
                        self._stop()
                        return
                    idle = frames.empty
                    if connection.silent:
                        self._deadline.arm(self._first_request_timeout, idle=idle)
                    else:
                        self._deadline.arm(self._idle_timeout if idle else self._request_timeout, idle=idle)
                    self._resume_reading()
                    return
                connection.silent = False
                answer: bytes | Later | None
                # ``state`` stays empty unless SASL keeps something there: then its two questions.
                if state and raw_sasl_expected(connection):  # after a version-0 SaslHandshake: a bare token
                    answer = raw_sasl_answer(core, connection, message)
                else:
                    answer = answer_now(connection, message)
                if type(answer) is bytes:
                    if not transport.is_closing():
                        transport.write(answer)
                elif isinstance(answer, Later):
                    park = answer.park
                    if park is not None:
                        self._parked_off = park(self._parked_answer, self._hand_on, self._parked_failed)
                        if self._parked_off is not None:
                            return  # the wake-up answers it (``_parked_answer``), off the task
                    self._pending = answer
                    self._wakeup.set()
                    return
                elif answer is not None:
                    self._write(answer)
                if state and should_close(connection):
                    self._stop()
                    return
                if self._writing_paused:
                    return
        except Exception as error:  # the task raises it, for the gateway's logging
            self._failure = error
            self._stop()

    # -- a request parked without the task (``Later.park``): the loop calls one of these -----------

    def _parked_answer(self, answer: bytes | None) -> None:
        self._parked_off = None
        if self._stopped:
            return
        if answer is not None:
            self._write(answer)
        if self._connection.state and should_close(self._connection):
            self._stop()
            return
        self._pump()

    def _hand_on(self, rest: Later) -> None:
        """The parked request goes on waiting in the task (a wake-up brought too little)."""
        self._parked_off = None
        if self._stopped:
            return
        self._pending = rest
        self._wakeup.set()

    def _parked_failed(self, error: Exception) -> None:
        self._parked_off = None
        self._failure = error
        self._stop()

    def _unpark(self) -> None:
        off, self._parked_off = self._parked_off, None
        if off is not None:
            off()

    def _refuse(self) -> None:
        """Answer the frame over the limit from its header alone (once that is in), then stop."""
        head = self._frames.refusal_head()
        if head is None:
            self._deadline.arm(self._request_timeout, idle=False)
            return
        correlation_id = int.from_bytes(head[4:8], "big", signed=True)
        self._write(encode_error_response(correlation_id, _MESSAGE_TOO_LARGE))
        self._stop()

    def _write(self, answer: bytes) -> None:
        transport = self._transport
        if transport is not None and not transport.is_closing():
            transport.write(answer)

    def _stop(self) -> None:
        self._stopped = True
        self._unpark()
        self._wakeup.set()

    def _pause_reading(self) -> None:
        if not self._reading_paused and self._transport is not None and not self._transport.is_closing():
            self._reading_paused = True
            self._transport.pause_reading()

    def _resume_reading(self) -> None:
        if self._reading_paused and self._transport is not None and not self._transport.is_closing():
            self._reading_paused = False
            self._transport.resume_reading()
