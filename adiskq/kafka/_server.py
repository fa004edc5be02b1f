"""``KafkaGateway``: the TCP server that answers Kafka clients from the streams under a root folder.

The server layer on AnyIO streams: it owns the listening socket, one task per connection,
deadlines and shutdown; the protocol (``wire/protocol.py``) and the handlers (``apis/``) do no I/O of
their own. A connection's requests are answered one at a time, in order, as a Kafka broker does (a
client pipelines requests and pairs answers by correlation id, in order). A slow or stalled client
holds only its own task: a frame it does not finish within ``request_timeout`` seconds, or an
answer it does not take within that time, closes its connection; an idle one is closed after
``idle_timeout`` seconds, as Kafka's ``connections.max.idle.ms`` does, and one that has sent no
whole request after the shorter of the two (a socket that never speaks would hold a descriptor and
a connection slot meanwhile); all enforced by one watcher for all connections (``_deadlines.py``, up
to a quarter of the shorter timeout late).

Two transports under the same connection task: plain TCP on asyncio is served from the socket's
callbacks (``_asyncio_transport.py``), which answer Produce and Fetch in place when they need no
wait and hand the rest to the task; TLS, and every connection on Trio, go through AnyIO's streams
(``_serve_requests``). Both answer through ``_answer_now``.
"""

from __future__ import annotations

import asyncio
import logging
import os
import socket
from collections.abc import Callable
from types import TracebackType
from typing import Any, Final, Literal, Self

import anyio
import anyio.abc
import anyio.lowlevel
from kio.schema.errors import ErrorCode

from .._errors import ClosedError, InvalidArgumentError
from .._storage.stream_creation import remove_leftovers
from . import apis as _apis  # registers every handler
from ._accepting import ResilientListener, connection_limit
from ._asyncio_transport import ConnectionProtocol
from ._core import Connection, GatewayCore
from ._deadlines import Deadline, Deadlines
from ._memory import MemoryReturn
from ._open_files import raise_open_files_limit
from ._options import GroupOptions, SecurityOptions
from ._registry import API_TABLE, Later, RequestContext, ResponseFrame, respond
from ._security import GatewayTLSListener, may_handle, raw_sasl_answer, raw_sasl_expected, should_close
from ._transactions import start_transactions
from .wire.framing import Frames, FrameTooLargeError
from .wire.protocol import (
    ProtocolError,
    RequestHeader,
    decode_request,
    encode_error_response,
    encode_response,
    frame_payload,
    parse_header,
    request_schema,
)

__all__ = ["DEFAULT_MAX_REQUEST_BYTES", "KafkaGateway"]

logger = logging.getLogger("adiskq.kafka")

DEFAULT_MAX_REQUEST_BYTES: Final = 100 * 2**20  # Kafka's socket.request.max.bytes
_UNSUPPORTED_VERSION: Final = 35
_MESSAGE_TOO_LARGE: Final = 10
_API_VERSIONS: Final = 18
_SHUTDOWN_GRACE_SECONDS: Final = 10.0  # requests in flight get this long to finish when closing
del _apis


class KafkaGateway:
    """Serves the streams directly under ``root`` over the Kafka protocol, as topics of the same name.

    ``async with KafkaGateway(root, port=0) as gateway:`` serves while the block runs (``gateway.port``
    is the bound port; 0 picks a free one); ``await gateway.serve()`` serves in the caller's task
    until cancelled (``task_group.start(gateway.serve)`` returns once it listens). ``partitions``:
    the partition count of topics created on first use; ``flush``: the flush mode of the streams it
    writes (``"sync"``: a produce is answered once it is on stable storage); ``auto_create``: create
    a topic a client asks Metadata for; ``shared``: write streams as a shared producer, beside library
    producers of other processes; ``advertise``: the ``HOST:PORT`` Metadata hands clients, when it is
    not the bound address; ``max_request_bytes``: a larger request is refused before it is read;
    ``max_connections_per_ip``: a client address's connections beyond this are closed at once (Kafka's
    ``max.connections.per.ip``; None, the default, as Kafka's: no limit);
    ``groups``: the consumer groups' session-timeout bounds and initial rebalance delay;
    ``security``: SASL (a credentials file) and TLS (a certificate and key).

    Leaving the block (or cancelling ``serve``) stops accepting, lets the requests in flight finish
    (up to 10 s), closes every connection and every producer it opened (each writes what is pending
    and fsyncs). A gateway serves once; using it again raises ``ClosedError``.
    """

    def __init__(
        self,
        root: str | os.PathLike[str],
        *,
        host: str = "127.0.0.1",
        port: int = 9092,
        partitions: int = 1,
        flush: Literal["async", "sync"] = "async",
        auto_create: bool = True,
        shared: bool = False,
        advertise: str | None = None,
        max_request_bytes: int = DEFAULT_MAX_REQUEST_BYTES,
        request_timeout: float = 30.0,
        idle_timeout: float = 600.0,
        max_connections_per_ip: int | None = None,
        groups: GroupOptions | None = None,
        security: SecurityOptions | None = None,
    ) -> None:
        if flush not in ("async", "sync"):
            raise InvalidArgumentError(f'flush={flush!r}: choose "async" (the default) or "sync"')
        if isinstance(partitions, bool) or not isinstance(partitions, int) or partitions < 1:
            raise InvalidArgumentError(f"partitions={partitions!r}: give 1 or more")
        if isinstance(port, bool) or not isinstance(port, int) or not 0 <= port <= 65535:
            raise InvalidArgumentError(f"port={port!r}: give 0 (any free port) to 65535")
        if isinstance(max_request_bytes, bool) or not isinstance(max_request_bytes, int) or max_request_bytes < 64:
            raise InvalidArgumentError(f"max_request_bytes={max_request_bytes!r}: give at least 64 bytes")
        if max_connections_per_ip is not None and (
            isinstance(max_connections_per_ip, bool)
            or not isinstance(max_connections_per_ip, int)
            or max_connections_per_ip < 1
        ):
            raise InvalidArgumentError(
                f"max_connections_per_ip={max_connections_per_ip!r}: give 1 or more, or None for no limit"
            )
        for name, seconds in (("request_timeout", request_timeout), ("idle_timeout", idle_timeout)):
            if isinstance(seconds, bool) or not isinstance(seconds, int | float) or not seconds > 0:
                raise InvalidArgumentError(f"{name}={seconds!r}: give a positive number of seconds")
        self.advertised: tuple[str, int] | None = None
        if advertise is not None:
            self.advertised = parse_host_port(advertise, what="advertise")
        self.root = os.fspath(root)
        self.host = host
        self.partitions = partitions
        self.flush: Literal["async", "sync"] = flush
        self.auto_create = auto_create
        self.shared = shared
        self.max_request_bytes = max_request_bytes
        self.request_timeout = float(request_timeout)
        self.idle_timeout = float(idle_timeout)
        # A new connection's first request must come within this (a socket that never speaks would
        # hold a descriptor and a connection slot for the whole idle timeout otherwise).
        self.first_request_timeout = min(self.request_timeout, self.idle_timeout)
        self.max_connections_per_ip = max_connections_per_ip
        self._per_address: dict[str, int] = {}  # open connections by client address (with a limit)
        self._memory = MemoryReturn()
        self.groups = groups or GroupOptions()
        self.security = security or SecurityOptions()
        self._requested_port = port
        self._port: int | None = None
        self._state: Literal["new", "serving", "closed"] = "new"
        self._core: GatewayCore | None = None
        self._deadlines: Deadlines | None = None
        self._stop = anyio.Event()
        self._task_group: anyio.abc.TaskGroup | None = None

    @property
    def port(self) -> int:
        """The port the gateway listens on (known once it serves)."""
        if self._port is None:
            raise ClosedError("the gateway is not serving yet: use `async with KafkaGateway(...)`")
        return self._port

    @property
    def port_or_none(self) -> int | None:
        """The bound port, or None before the gateway listens."""
        return self._port

    # -- running ---------------------------------------------------------------------------------

    async def __aenter__(self) -> Self:
        task_group = anyio.create_task_group()
        await task_group.__aenter__()
        try:
            await task_group.start(self.serve)
        except BaseException as error:
            self._stop.set()
            await task_group.__aexit__(type(error), error, error.__traceback__)
            raise
        self._task_group = task_group
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> bool | None:
        self._stop.set()
        task_group, self._task_group = self._task_group, None
        if task_group is None:
            return None
        return await task_group.__aexit__(exc_type, exc, tb)

    async def aclose(self) -> None:
        """Stop serving (the same as leaving ``async with``; ``serve`` returns)."""
        self._stop.set()
        await anyio.lowlevel.checkpoint()

    async def serve(self, *, task_status: anyio.abc.TaskStatus[int] = anyio.TASK_STATUS_IGNORED) -> None:
        """Listen and answer until ``aclose()`` or cancellation; ``task_status.started(port)`` once
        it listens."""
        if self._state != "new":
            raise ClosedError("a KafkaGateway serves once; create a new one to serve again")
        self._state = "serving"
        # Every partition written or read holds files: take all the descriptors the system allows.
        raise_open_files_limit()
        try:
            await anyio.to_thread.run_sync(remove_leftovers, self.root)  # creations a crash cut short
            ssl_context, sasl = self.security.load()  # reads the credentials and certificate: fails early
            tcp_listener = await anyio.create_tcp_listener(local_host=self.host, local_port=self._requested_port)
        except BaseException:
            self._state = "closed"
            raise
        # Plain TCP on asyncio: served from the socket's callbacks (``_asyncio_transport.py``).
        # (anyio's own answer to "which loop": sniffio is no dependency of anyio's any more.)
        on_asyncio = isinstance(anyio.lowlevel.current_token().native_token, asyncio.AbstractEventLoop)
        raw_sockets = ssl_context is None and on_asyncio
        listener: anyio.abc.Listener[Any] = ResilientListener(tcp_listener, connection_limit(), raw_sockets=raw_sockets)
        if ssl_context is not None:
            listener = GatewayTLSListener(
                listener, ssl_context, standard_compatible=False, handshake_timeout=self.request_timeout
            )
        port = self._port = int(tcp_listener.extra(anyio.abc.SocketAttribute.local_port))  # noqa: S610 (anyio, not Django)
        host, advertised_port = self.advertised or (self._client_host(), port)
        core = self._core = GatewayCore(
            self.root,
            partitions=self.partitions,
            flush=self.flush,
            auto_create=self.auto_create,
            shared=self.shared,
            advertised_host=host,
            advertised_port=advertised_port,
        )
        deadlines = self._deadlines = Deadlines(min(self.request_timeout, self.idle_timeout))
        groups = self.groups.install(core)
        self.security.install(core, sasl)
        try:
            # Transactions left open by the last run are aborted, and endings it decided carried out,
            # before any client is answered.
            transactions = start_transactions(core)
            await transactions.recover()
        except BaseException:
            self._state = "closed"
            with anyio.CancelScope(shield=True):
                await listener.aclose()
                await core.topics.aclose()
            raise
        try:
            async with anyio.create_task_group() as connections:
                accepting = anyio.CancelScope()
                timers = anyio.CancelScope()

                async def run_timers() -> None:
                    with timers:
                        async with anyio.create_task_group() as both:
                            both.start_soon(groups.run)
                            both.start_soon(transactions.run)

                connections.start_soon(run_timers)
                watching = anyio.CancelScope()

                async def watch_deadlines() -> None:
                    with watching:
                        await deadlines.run()

                connections.start_soon(watch_deadlines)

                async def accept() -> None:
                    with accepting:
                        await listener.serve(self._serve_connection, task_group=connections)

                connections.start_soon(accept)
                logger.info("adiskq: Kafka gateway for %s listening on %s:%d", self.root, self.host, port)
                task_status.started(port)
                await self._stop.wait()
                # Shutting down: no new connection; idle connections end at once, long polls answer,
                # a request in flight gets a grace period to finish.
                accepting.cancel()
                timers.cancel()
                groups.coordinator.close()
                core.closing = True
                core.wake_fetches()
                deadlines.end_idle()
                watching.cancel()
                connections.cancel_scope.deadline = anyio.current_time() + _SHUTDOWN_GRACE_SECONDS
        finally:
            self._state = "closed"
            core.closing = True
            groups.aclose()
            with anyio.CancelScope(shield=True):
                await transactions.store_deferred()
                await listener.aclose()
                await core.topics.aclose()
            logger.info("adiskq: Kafka gateway for %s closed", self.root)

    def _client_host(self) -> str:
        """The host Metadata names when no ``advertise`` is given: the bound one (localhost for a
        wildcard bind, which a client could not dial)."""
        return "127.0.0.1" if self.host in ("", "0.0.0.0", "::") else self.host  # noqa: S104 (a comparison)

    # -- one connection --------------------------------------------------------------------------

    async def _serve_connection(self, stream: anyio.abc.ByteStream | socket.socket) -> None:
        peer = _peer_of(stream)
        address = peer.rsplit(":", 1)[0]
        limit = self.max_connections_per_ip
        if limit is None:
            await self._serve_admitted(stream, peer)
            return
        open_now = self._per_address.get(address, 0)
        if open_now >= limit:
            # Kafka's max.connections.per.ip: the connection is closed at once, without an answer.
            logger.warning(
                "adiskq: Kafka client %s has %d connections open, max_connections_per_ip; this one closed",
                address,
                open_now,
            )
            if isinstance(stream, socket.socket):
                stream.close()
            else:
                with anyio.CancelScope(shield=True):
                    await stream.aclose()
            return
        self._per_address[address] = open_now + 1
        try:
            await self._serve_admitted(stream, peer)
        finally:
            left = self._per_address[address] - 1
            if left:
                self._per_address[address] = left
            else:
                del self._per_address[address]

    async def _serve_admitted(self, stream: anyio.abc.ByteStream | socket.socket, peer: str) -> None:
        core, deadlines = self._core, self._deadlines
        assert core is not None
        assert deadlines is not None
        connection = Connection.open(peer, core.topics)
        core.connections.add(connection)
        deadline = deadlines.watch()
        protocol: ConnectionProtocol | None = None
        try:
            with deadline.scope:
                if isinstance(stream, socket.socket):
                    protocol = ConnectionProtocol(
                        core,
                        connection,
                        deadline,
                        self._answer_now,
                        max_request_bytes=self.max_request_bytes,
                        request_timeout=self.request_timeout,
                        idle_timeout=self.idle_timeout,
                    )
                    served = protocol
                    await asyncio.get_running_loop().connect_accepted_socket(lambda: served, stream)
                    await protocol.run()
                else:
                    await self._serve_requests(stream, connection, deadline)
            if deadline.expired is not None and deadline.expired != "closing" and connection.silent:
                logger.info(
                    "adiskq: Kafka client %s sent no request within %.0f s; connection closed",
                    peer,
                    self.first_request_timeout,
                )
            elif deadline.expired == "stalled":
                logger.info("adiskq: Kafka client %s stalled for %.0f s; connection closed", peer, self.request_timeout)
        except (anyio.EndOfStream, anyio.IncompleteRead, anyio.BrokenResourceError, anyio.ClosedResourceError):
            pass  # the client went away
        except Unauthenticated as error:
            logger.info("adiskq: Kafka client %s: %s; connection closed", peer, error)
        except ProtocolError as error:
            logger.warning("adiskq: Kafka client %s sent a malformed request (%s); connection closed", peer, error)
        except OSError as error:
            logger.info("adiskq: Kafka client %s: %s; connection closed", peer, error)
        except Exception:
            logger.exception("adiskq: Kafka client %s: a request failed; connection closed", peer)
        finally:
            deadlines.forget(deadline)
            core.connections.discard(connection)
            connection.close()
            if isinstance(stream, socket.socket):
                if protocol is not None and protocol.connected:
                    protocol.close(abort=deadline.expired is not None)
                else:
                    stream.close()  # no transport took it
            else:
                with anyio.CancelScope(shield=True):
                    await stream.aclose()
            if deadline.expired == "stalled" or (protocol is not None and protocol.backed_up):
                await self._memory.after_backed_up_connection()

    async def _serve_requests(self, stream: anyio.abc.ByteStream, connection: Connection, deadline: Deadline) -> None:
        """Answer the connection's requests in order until it closes, stalls, idles out, fails to
        authenticate, or the gateway closes. One receive serves every request it brought (a client
        pipelining); only waits on the client are under a deadline, never a request's handling."""
        core = self._core
        assert core is not None
        frames = Frames(self.max_request_bytes)
        while not core.closing:
            try:
                message = frames.next_frame()
            except FrameTooLargeError as too_large:
                await self._refuse_large(stream, frames, deadline, too_large.size, connection.peer)
                return
            if message is None:
                idle = frames.empty
                if connection.silent:
                    deadline.arm(self.first_request_timeout, idle=idle)
                else:
                    deadline.arm(self.idle_timeout if idle else self.request_timeout, idle=idle)
                data = await stream.receive(frames.receive_bytes())
                if deadline.disarm():
                    return  # idle too long, stalled mid-frame, or the gateway is closing
                frames.feed(data)
                continue
            connection.silent = False
            if raw_sasl_expected(connection):  # after a version-0 SaslHandshake: a bare token
                answer = await raw_sasl_answer(core, connection, message).finish()
            else:
                answer = await self._answer(connection, message)
            if answer is not None:
                deadline.arm(self.request_timeout, idle=False)
                await stream.send(answer)
                if deadline.disarm():
                    return
            if should_close(connection):
                return  # a failed authentication: answered, then closed, as Kafka does

    async def _refuse_large(
        self, stream: anyio.abc.ByteStream, frames: Frames, deadline: Deadline, size: int, peer: str
    ) -> None:
        """Answer a request over ``max_request_bytes`` from its header alone, without reading it."""
        logger.warning(
            "adiskq: Kafka client %s sent a request of %d bytes, over max_request_bytes=%d; connection closed",
            peer,
            size,
            self.max_request_bytes,
        )
        deadline.arm(self.request_timeout, idle=False)
        while (head := frames.refusal_head()) is None:
            frames.feed(await stream.receive(frames.receive_bytes()))
            if deadline.expired:
                return
        correlation_id = int.from_bytes(head[4:8], "big", signed=True)
        await stream.send(encode_error_response(correlation_id, _MESSAGE_TOO_LARGE))
        deadline.disarm()

    async def _answer(self, connection: Connection, message: bytes) -> bytes | None:
        """The response frame for one request frame (None: the request takes no response)."""
        answer = self._answer_now(connection, message)
        return await answer.finish() if isinstance(answer, Later) else answer

    def _answer_now(self, connection: Connection, message: bytes) -> bytes | Later | None:
        """The response frame for one request frame, if it can be answered without waiting (None:
        the request takes no response); otherwise ``Later``, which the connection's task finishes."""
        core = self._core
        assert core is not None
        header, at = parse_header(message)
        api = API_TABLE.get(header.api_key)
        if not may_handle(core, connection, header.api_key):  # (an API no one serves included)
            raise Unauthenticated(f"{api.name if api else f'API key {header.api_key}'} before SASL authentication")
        if api is None or not api.min_version <= header.api_version <= api.max_version:
            return self._unsupported(header.api_key, header.api_version, header.correlation_id)
        request = decode_request(header, message, at)
        context = RequestContext(core, connection, header)
        if api.now is None:
            handler = api.handler

            async def handle() -> bytes | None:
                return _frame(header, await handler(context, request))

            return Later(handle)
        response = api.now(context, request)
        if isinstance(response, Later):
            return _framed(header, response)
        return _frame(header, response)

    def _unsupported(self, api_key: int, api_version: int, correlation_id: int) -> bytes:
        """Kafka's answer to a request it does not serve in that version: UNSUPPORTED_VERSION; for
        ApiVersions, in the version-0 layout with the supported ranges, so the client can retry."""
        if api_key == _API_VERSIONS:
            from .apis.api_versions import supported_versions

            v0 = request_schema(_API_VERSIONS, 0)
            response: Any = respond(
                v0, "ApiVersionsResponse", error_code=ErrorCode.unsupported_version, api_keys=supported_versions(v0)
            )
            return encode_response(correlation_id, response)
        name = API_TABLE[api_key].name if api_key in API_TABLE else f"API key {api_key}"
        logger.info("adiskq: a Kafka client sent %s version %d, which the gateway does not serve", name, api_version)
        return encode_error_response(correlation_id, _UNSUPPORTED_VERSION)


def _peer_of(stream: anyio.abc.ByteStream | socket.socket) -> str:
    """The client's address as ``host:port``, for the log ("?" when it cannot be told)."""
    try:
        if isinstance(stream, socket.socket):
            address = stream.getpeername()
        else:
            address = stream.extra(anyio.abc.SocketAttribute.remote_address)  # noqa: S610 (anyio, not Django)
    except (OSError, TypeError, anyio.TypedAttributeLookupError):
        return "?"
    return f"{address[0]}:{address[1]}" if isinstance(address, tuple) else str(address)


def _frame(header: RequestHeader, response: Any) -> bytes | None:
    """A handler's answer as a response frame (None: the request takes no response)."""
    if response is None:
        return None
    if type(response) is ResponseFrame:  # written whole (Fetch)
        frame: bytes = response.frame
        return frame
    if isinstance(response, bytes | list):  # the payload already encoded (Produce), or its pieces (Fetch)
        return frame_payload(header.correlation_id, header.api_key, header.api_version, response)
    return encode_response(header.correlation_id, response)


def _framed(header: RequestHeader, later: Later) -> Later:
    """``later``, answering response frames (and so does the rest a parked wait hands on)."""
    finish = later.finish

    async def go_on() -> bytes | None:
        return _frame(header, await finish())

    park = later.park
    if park is None:
        return Later(go_on)
    parked = park

    def park_framed(
        answer: Callable[[bytes | None], None], hand_on: Callable[[Later], None], fail: Callable[[Exception], None]
    ) -> Callable[[], None] | None:
        return parked(
            lambda response: answer(_frame(header, response)), lambda rest: hand_on(_framed(header, rest)), fail
        )

    return Later(go_on, park_framed)


class Unauthenticated(Exception):
    """A request other than ApiVersions or SASL's own on a connection that has not authenticated."""


def parse_host_port(text: str, *, what: str) -> tuple[str, int]:
    """``HOST:PORT`` (``[v6]:PORT`` for IPv6) as a pair; InvalidArgumentError saying what is wrong."""
    host, sep, port_text = text.rpartition(":")
    if not sep or not host or not port_text.isdigit() or not 0 <= int(port_text) <= 65535:
        raise InvalidArgumentError(f"{what}={text!r}: give HOST:PORT, such as 127.0.0.1:9092")
    if host.startswith("[") and host.endswith("]"):
        host = host[1:-1]
    return host, int(port_text)
