"""Checks of the arguments the async layer's constructors take: each raises ``InvalidArgumentError``
(a ``ValueError``) that names the argument and says what it takes, before any I/O."""

from __future__ import annotations

import datetime as dt
from typing import Literal

from .._errors import InvalidArgumentError

__all__ = ["Start", "check_max_messages", "check_on_data_loss", "check_start", "positive_seconds"]

# Where a reader starts: see ``Consumer``.
Start = Literal["oldest", "newest", "active-oldest"] | int | dt.datetime


def positive_seconds(name: str, seconds: object, *, optional: bool = False) -> float | None:
    """``seconds`` as a float if it is a positive number (or None, when ``optional``)."""
    if seconds is None and optional:
        return None
    if isinstance(seconds, bool) or not isinstance(seconds, int | float) or not seconds > 0:
        raise InvalidArgumentError(f"{name}={seconds!r}: give a positive number of seconds")
    return float(seconds)


def check_start(start: object) -> None:
    """InvalidArgumentError unless ``start`` is a valid start position."""
    if isinstance(start, str):
        if start not in ("oldest", "newest", "active-oldest"):
            raise InvalidArgumentError(
                f"start={start!r}: use 'oldest', 'newest', 'active-oldest', an offset or a datetime"
            )
    elif isinstance(start, bool) or not isinstance(start, int | dt.datetime):
        raise InvalidArgumentError(f"start={start!r}: use 'oldest', 'newest', 'active-oldest', an offset or a datetime")
    elif isinstance(start, int) and start < 0:
        raise InvalidArgumentError(f"start={start}: offsets start at 0")


def check_on_data_loss(on_data_loss: object) -> None:
    """InvalidArgumentError unless ``on_data_loss`` is ``"skip"`` or ``"raise"``."""
    if on_data_loss not in ("skip", "raise"):
        raise InvalidArgumentError(f"on_data_loss={on_data_loss!r}: use 'skip' or 'raise'")


def check_max_messages(max_messages: object) -> int:
    """``max_messages`` if it is a positive int, else InvalidArgumentError."""
    if isinstance(max_messages, bool) or not isinstance(max_messages, int) or max_messages < 1:
        raise InvalidArgumentError(f"max_messages={max_messages!r}: give a positive number")
    return max_messages
