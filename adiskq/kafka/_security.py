"""SASL and TLS options of the gateway, and the rule for requests before authentication.

With SASL on, a connection may send only ApiVersions, SaslHandshake and SaslAuthenticate until it
has authenticated; any other request closes it, as a Kafka broker's SASL listener does (the client
then reports that it was not authenticated rather than a response it cannot read). A failed
SaslAuthenticate is answered, then the connection is closed. TLS wraps every connection (anyio's
TLS streams over an ``ssl.SSLContext`` made from the server's certificate and key files).
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
from anyio import aclose_forcefully
from anyio.streams.tls import TLSListener

from ._core import Connection, GatewayCore
from .credentials import Credentials
from .sasl import SUPPORTED_MECHANISMS, SaslServer

__all__ = [
    "GatewayTLSListener",
    "SaslSettings",
    "install_sasl",
    "may_handle",
    "sasl_server",
    "server_ssl_context",
    "should_close",
]

logger: Final = logging.getLogger("adiskq.kafka")
_KEY: Final = "sasl"
_CONNECTION_SASL: Final = "sasl"
_CLOSE: Final = "close_after_response"
_RAW: Final = "raw_sasl"
# ApiVersions, SaslHandshake, SaslAuthenticate: what a client sends before it has authenticated.
PRE_AUTH_API_KEYS: Final = frozenset({18, 17, 36})


@dataclasses.dataclass(frozen=True, slots=True)
class SaslSettings:
    """The gateway's credentials and the mechanisms it offers."""

    credentials: Credentials
    mechanisms: tuple[str, ...] = SUPPORTED_MECHANISMS


def install_sasl(gateway: GatewayCore, settings: SaslSettings) -> None:
    """Require SASL on every connection of the gateway."""
    gateway.extensions[_KEY] = settings


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
    """May this connection's request be answered? False: close the connection instead."""
    if api_key in PRE_AUTH_API_KEYS or _KEY not in gateway.extensions:  # allowed before, or SASL off
        return True
    server = sasl_server(gateway, connection)
    return server is None or server.authenticated


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


def raw_sasl_answer(gateway: GatewayCore, connection: Connection, token: bytes) -> bytes | None:
    """The framed answer to one bare SASL token (version-0 handshake); a refusal (None) closes the
    connection without an answer, as Kafka does there (the bare exchange has no error field)."""
    server = sasl_server(gateway, connection)
    assert server is not None
    step = server.step(token)
    if step.error:
        close_after_response(connection)
        return None
    if server.authenticated:
        del connection.state[_RAW]
    return struct.pack(">i", len(step.token)) + step.token


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
