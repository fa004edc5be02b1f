"""SASL and TLS options of the gateway, and the rule for requests before authentication.

With SASL on, a connection may send only ApiVersions, SaslHandshake and (after a handshake)
SaslAuthenticate until it has authenticated; any other request closes it, as a Kafka broker's SASL
listener does (the client then reports that it was not authenticated rather than a response it
cannot read); so does a request of an API the gateway does not know. A failed SaslAuthenticate is
answered after a delay (Kafka's ``connection.failed.authentication.delay.ms``), then the connection
is closed. A PLAIN login derives a key (PBKDF2) in a worker thread, and as long for an unknown user
as for a known one. TLS wraps every connection (anyio's TLS streams over an ``ssl.SSLContext`` made
from the server's certificate and key files).
"""

from __future__ import annotations

import dataclasses
import logging
import os
import ssl
import struct
from typing import Final

import anyio
import anyio.abc
import anyio.to_thread
from anyio import aclose_forcefully
from anyio.streams.tls import TLSListener

from ._core import Connection, GatewayCore
from ._registry import Later
from .credentials import Credentials
from .sasl import SUPPORTED_MECHANISMS, SaslServer, SaslStep

__all__ = [
    "GatewayTLSListener",
    "SaslSettings",
    "install_sasl",
    "may_handle",
    "sasl_server",
    "sasl_step",
    "server_ssl_context",
    "should_close",
]

logger: Final = logging.getLogger("adiskq.kafka")
_KEY: Final = "sasl"
_CONNECTION_SASL: Final = "sasl"
_CLOSE: Final = "close_after_response"
_RAW: Final = "raw_sasl"
_LIMITER: Final = "sasl.limiter"
# ApiVersions, SaslHandshake, SaslAuthenticate: what a client sends before it has authenticated.
PRE_AUTH_API_KEYS: Final = frozenset({18, 17, 36})
_SASL_AUTHENTICATE: Final = 36
DEFAULT_FAILED_AUTHENTICATION_DELAY_MS: Final = 100  # Kafka's connection.failed.authentication.delay.ms
# PLAIN logins derive a key (PBKDF2) in worker threads, at most this many at once: a flood of them
# takes these threads, not the event loop nor the threads that store offsets.
_KEY_DERIVATIONS_AT_ONCE: Final = 2


@dataclasses.dataclass(frozen=True, slots=True)
class SaslSettings:
    """The gateway's credentials, the mechanisms it offers, and the wait after a failed login."""

    credentials: Credentials
    mechanisms: tuple[str, ...] = SUPPORTED_MECHANISMS
    failed_delay_seconds: float = DEFAULT_FAILED_AUTHENTICATION_DELAY_MS / 1000


def install_sasl(gateway: GatewayCore, settings: SaslSettings) -> None:
    """Require SASL on every connection of the gateway (called as it starts serving)."""
    gateway.extensions[_KEY] = settings
    gateway.extensions[_LIMITER] = anyio.CapacityLimiter(_KEY_DERIVATIONS_AT_ONCE)


async def sasl_step(gateway: GatewayCore, server: SaslServer, token: bytes) -> SaslStep:
    """One SaslAuthenticate token through the connection's exchange. A PLAIN login's key derivation
    runs in a worker thread (the event loop serves the other clients meanwhile); a refusal is
    answered after the settings' delay, as Kafka delays it."""
    if server.derives_key:
        limiter = gateway.extensions.get(_LIMITER)
        assert isinstance(limiter, anyio.CapacityLimiter)
        step = await anyio.to_thread.run_sync(server.step, token, limiter=limiter)
    else:
        step = server.step(token)
    if step.error:
        settings = sasl_settings(gateway)
        if settings is not None and settings.failed_delay_seconds > 0:
            await anyio.sleep(settings.failed_delay_seconds)
    return step


def sasl_settings(gateway: GatewayCore) -> SaslSettings | None:
    """The gateway's SASL settings, or None when SASL is off."""
    settings = gateway.extensions.get(_KEY)
    assert settings is None or isinstance(settings, SaslSettings)
    return settings


def sasl_server(gateway: GatewayCore, connection: Connection) -> SaslServer | None:
    """This connection's SASL exchange (None when SASL is off)."""
    settings = sasl_settings(gateway)
    if settings is None:
        return None
    server = connection.state.get(_CONNECTION_SASL)
    if server is None:
        server = connection.state[_CONNECTION_SASL] = SaslServer(settings.credentials, settings.mechanisms)
    assert isinstance(server, SaslServer)
    return server


def may_handle(gateway: GatewayCore, connection: Connection, api_key: int) -> bool:
    """May this connection's request be answered? False: close the connection instead. Before a
    SaslHandshake, a SaslAuthenticate closes it too, as Kafka's SASL listener does (it expects
    ApiVersions or SaslHandshake then)."""
    if _KEY not in gateway.extensions:  # SASL off
        return True
    if api_key in PRE_AUTH_API_KEYS and api_key != _SASL_AUTHENTICATE:
        return True
    server = sasl_server(gateway, connection)
    if server is None or server.authenticated:
        return True
    return api_key == _SASL_AUTHENTICATE and server.mechanism is not None


def close_after_response(connection: Connection) -> None:
    """Close the connection once the response being built is sent (a failed authentication)."""
    connection.state[_CLOSE] = True


def should_close(connection: Connection) -> bool:
    """True once a handler asked for the connection to be closed after its response."""
    return connection.state.get(_CLOSE) is True


def expect_raw_sasl(connection: Connection) -> None:
    """A version-0 SaslHandshake succeeded: the client's next frames are bare SASL tokens."""
    connection.state[_RAW] = True


def raw_sasl_expected(connection: Connection) -> bool:
    """True while the connection sends bare SASL tokens (framed by size only, no request header)."""
    return connection.state.get(_RAW) is True


def raw_sasl_answer(gateway: GatewayCore, connection: Connection, token: bytes) -> Later:
    """The framed answer to one bare SASL token (version-0 handshake), to be finished by the
    connection's task (``sasl_step`` may derive a key, and waits after a refusal); a refusal (None)
    closes the connection without an answer, as Kafka does there (the bare exchange has no error
    field)."""
    server = sasl_server(gateway, connection)
    assert server is not None

    async def answer() -> bytes | None:
        step = await sasl_step(gateway, server, token)
        if step.error:
            close_after_response(connection)
            return None
        if server.authenticated:
            del connection.state[_RAW]
        return struct.pack(">i", len(step.token)) + step.token

    return Later(answer)


class GatewayTLSListener(TLSListener):
    """anyio's TLS listener, logging a failed handshake (a client that does not trust the certificate,
    one that speaks plain Kafka to a TLS port) as one line instead of a traceback."""

    @staticmethod
    async def handle_handshake_error(exc: BaseException, stream: anyio.abc.AnyByteStream) -> None:
        await aclose_forcefully(stream)
        if isinstance(exc, Exception) and not isinstance(exc, anyio.get_cancelled_exc_class()):
            logger.info("adiskq: TLS handshake with a Kafka client failed: %s", exc)
            return
        raise exc


def server_ssl_context(
    certfile: str | os.PathLike[str], keyfile: str | os.PathLike[str] | None = None
) -> ssl.SSLContext:
    """A TLS server context (TLS 1.2 or later) from a PEM certificate chain and its private key."""
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    context.load_cert_chain(os.fspath(certfile), None if keyfile is None else os.fspath(keyfile))
    return context
