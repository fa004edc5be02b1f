"""``KafkaGateway``'s consumer-group and security options, as values checked when they are made."""

from __future__ import annotations

import dataclasses
import os
import ssl

from .._errors import InvalidArgumentError
from ._core import GatewayCore
from ._groups import GroupService, install_groups
from ._security import DEFAULT_FAILED_AUTHENTICATION_DELAY_MS, SaslSettings, install_sasl, server_ssl_context
from .credentials import load_credentials
from .group_coordinator import (
    DEFAULT_INITIAL_REBALANCE_DELAY_MS,
    DEFAULT_MAX_SESSION_TIMEOUT_MS,
    DEFAULT_MIN_SESSION_TIMEOUT_MS,
    GroupCoordinator,
)
from .sasl import SUPPORTED_MECHANISMS

__all__ = ["GroupOptions", "SecurityOptions"]


def _whole_ms(name: str, value: object) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise InvalidArgumentError(f"{name}={value!r}: give a whole number of milliseconds, 0 or more")
    return value


@dataclasses.dataclass(frozen=True, slots=True)
class GroupOptions:
    """How the gateway coordinates consumer groups.

    A member's ``session.timeout.ms`` must lie in ``min_session_timeout_ms..max_session_timeout_ms``
    (Kafka's ``group.min/max.session.timeout.ms``; a lower minimum lets tests expel dead members
    fast). ``initial_rebalance_delay_ms`` holds an empty group's first generation back that long so
    consumers starting together join one generation (Kafka's ``group.initial.rebalance.delay.ms``).
    """

    min_session_timeout_ms: int = DEFAULT_MIN_SESSION_TIMEOUT_MS
    max_session_timeout_ms: int = DEFAULT_MAX_SESSION_TIMEOUT_MS
    initial_rebalance_delay_ms: int = DEFAULT_INITIAL_REBALANCE_DELAY_MS

    def __post_init__(self) -> None:
        low = _whole_ms("min_session_timeout_ms", self.min_session_timeout_ms)
        high = _whole_ms("max_session_timeout_ms", self.max_session_timeout_ms)
        _whole_ms("initial_rebalance_delay_ms", self.initial_rebalance_delay_ms)
        if low > high:
            raise InvalidArgumentError(
                f"min_session_timeout_ms={low} is above max_session_timeout_ms={high}: "
                "give a minimum no larger than the maximum"
            )

    def install(self, core: GatewayCore) -> GroupService:
        """The gateway's group service, with these options."""
        coordinator = GroupCoordinator(
            min_session_timeout_ms=self.min_session_timeout_ms,
            max_session_timeout_ms=self.max_session_timeout_ms,
            initial_rebalance_delay_ms=self.initial_rebalance_delay_ms,
        )
        return install_groups(core, coordinator)


@dataclasses.dataclass(frozen=True, slots=True)
class SecurityOptions:
    """SASL and TLS for every connection (both off by default).

    ``sasl_credentials``: a credentials file (``adiskq kafka-user`` writes one; its format is in
    ``adiskq/kafka/credentials.py``): every client must then authenticate with one of
    ``sasl_mechanisms`` (PLAIN, SCRAM-SHA-256, SCRAM-SHA-512). ``tls_cert`` and ``tls_key``: PEM files
    of the server's certificate chain and private key (the key may be in the certificate file):
    every connection is then TLS. PLAIN sends the password itself, so use it over TLS.
    ``failed_authentication_delay_ms``: how long a failed login waits before its answer and the
    connection's close (Kafka's ``connection.failed.authentication.delay.ms``, 100 ms too), so a
    client guessing passwords gets few tries a second a connection.
    """

    sasl_credentials: str | os.PathLike[str] | None = None
    sasl_mechanisms: tuple[str, ...] = SUPPORTED_MECHANISMS
    tls_cert: str | os.PathLike[str] | None = None
    tls_key: str | os.PathLike[str] | None = None
    failed_authentication_delay_ms: int = DEFAULT_FAILED_AUTHENTICATION_DELAY_MS

    def __post_init__(self) -> None:
        unknown = sorted(set(self.sasl_mechanisms) - set(SUPPORTED_MECHANISMS))
        if unknown or not self.sasl_mechanisms:
            raise InvalidArgumentError(
                f"sasl_mechanisms={self.sasl_mechanisms!r}: choose from {', '.join(SUPPORTED_MECHANISMS)}"
            )
        if self.tls_key is not None and self.tls_cert is None:
            raise InvalidArgumentError("tls_key given without tls_cert: give the certificate file too")
        _whole_ms("failed_authentication_delay_ms", self.failed_authentication_delay_ms)

    def load(self) -> tuple[ssl.SSLContext | None, SaslSettings | None]:
        """Read the files: the TLS context and the SASL settings (None where off).

        A file that cannot be read or used raises InvalidArgumentError saying which and why.
        """
        context = None
        if self.tls_cert is not None:
            try:
                context = server_ssl_context(self.tls_cert, self.tls_key)
            except (OSError, ssl.SSLError) as error:
                raise InvalidArgumentError(
                    f"tls_cert={os.fspath(self.tls_cert)!r}, tls_key={self.tls_key!r}: cannot load a certificate "
                    f"and private key from them ({error}); give PEM files"
                ) from None
        settings = None
        if self.sasl_credentials is not None:
            try:
                settings = SaslSettings(
                    load_credentials(self.sasl_credentials),
                    tuple(self.sasl_mechanisms),
                    self.failed_authentication_delay_ms / 1000,
                )
            except (OSError, ValueError) as error:
                raise InvalidArgumentError(
                    f"sasl_credentials: {error}; write the file with `adiskq kafka-user FILE NAME`"
                ) from None
        return context, settings

    @staticmethod
    def install(core: GatewayCore, settings: SaslSettings | None) -> None:
        """Require SASL on the gateway's connections (when ``settings`` is not None)."""
        if settings is not None:
            install_sasl(core, settings)
