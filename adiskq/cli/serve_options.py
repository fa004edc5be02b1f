"""``adiskq serve``'s consumer-group and security options (SASL, TLS), as click options and gateway values."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

import click

__all__ = ["gateway_options", "group_and_security_options"]

F = TypeVar("F", bound=Callable[..., Any])
_MECHANISMS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512")


def group_and_security_options(command: F) -> F:
    """Add the options to ``serve`` (they reach it as keyword arguments for ``gateway_options``)."""
    options = [
        click.option(
            "--sasl-credentials",
            type=click.Path(dir_okay=False, exists=True),
            default=None,
            metavar="FILE",
            help="Require SASL: users and SCRAM keys in FILE (written by `adiskq kafka-user FILE NAME`).",
        ),
        click.option(
            "--sasl-mechanism",
            "sasl_mechanisms",
            type=click.Choice(_MECHANISMS),
            multiple=True,
            help="A SASL mechanism to offer (repeat for several; default: all three).",
        ),
        click.option("--tls-cert", type=click.Path(dir_okay=False, exists=True), default=None, metavar="PEM",
                     help="Serve TLS with this certificate chain (PEM; may hold the key too)."),
        click.option("--tls-key", type=click.Path(dir_okay=False, exists=True), default=None, metavar="PEM",
                     help="The certificate's private key (PEM), when not in --tls-cert."),
        click.option("--group-min-session-timeout-ms", type=click.IntRange(min=1), default=6000, show_default=True,
                     help="Shortest session.timeout.ms a group member may ask for (group.min.session.timeout.ms)."),
        click.option("--group-max-session-timeout-ms", type=click.IntRange(min=1), default=1_800_000,
                     show_default=True, help="Longest session.timeout.ms a group member may ask for."),
        click.option("--group-initial-rebalance-delay-ms", type=click.IntRange(min=0), default=3000,
                     show_default=True,
                     help="How long an empty group waits for more members before its first generation "
                          "(group.initial.rebalance.delay.ms)."),
    ]  # fmt: skip
    for option in reversed(options):
        command = option(command)
    return command


def gateway_options(values: dict[str, Any]) -> dict[str, Any]:
    """``KafkaGateway``'s ``groups=`` and ``security=`` from the options' values."""
    from ..kafka import GroupOptions, SecurityOptions

    mechanisms = tuple(values["sasl_mechanisms"]) or _MECHANISMS
    return {
        "groups": GroupOptions(
            min_session_timeout_ms=values["group_min_session_timeout_ms"],
            max_session_timeout_ms=values["group_max_session_timeout_ms"],
            initial_rebalance_delay_ms=values["group_initial_rebalance_delay_ms"],
        ),
        "security": SecurityOptions(
            sasl_credentials=values["sasl_credentials"],
            sasl_mechanisms=mechanisms,
            tls_cert=values["tls_cert"],
            tls_key=values["tls_key"],
        ),
    }
