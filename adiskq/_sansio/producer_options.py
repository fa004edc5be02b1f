"""Checks of the ``Producer`` arguments both backends take (a stream's folder and a ``kafka://``
topic), in one place so each mistake gets the same error on both, before any I/O."""

from __future__ import annotations

from .._errors import InvalidArgumentError
from .values import Retention

__all__ = ["check_producer_options"]


def check_producer_options(
    *,
    flush: object,
    shared: object,
    compression: object,
    retention: object,
    value_serializer: object,
    key_serializer: object,
) -> None:
    """``InvalidArgumentError`` (or ``TypeError`` for a value of the wrong kind) naming the argument
    and what it takes."""
    if compression not in (None, "zstd"):
        raise InvalidArgumentError(f'compression={compression!r}: give "zstd", or None (the default) for none')
    if flush not in ("async", "sync"):
        raise InvalidArgumentError(f'flush={flush!r}: choose "async" (the default) or "sync"')
    if not isinstance(shared, bool):
        raise InvalidArgumentError(f"shared={shared!r}: give True (write beside other producers) or False")
    if retention is not None and not isinstance(retention, Retention):
        raise TypeError("retention= takes adiskq.Retention(max_bytes=..., max_age=..., max_disk_usage=...)")
    for name, given in (("value_serializer", value_serializer), ("key_serializer", key_serializer)):
        if given is not None and not callable(given):
            raise TypeError(f"{name} takes a function that returns the bytes to store, not {type(given).__name__}")
