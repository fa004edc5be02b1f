"""The optional parts of adiskq and the extras that install them: a missing one is the user's to
install, so its ``ModuleNotFoundError`` becomes ``MissingExtraError`` naming the ``pip install`` line.

Each entry point of an optional part (``import adiskq.kafka``, ``adiskq.spark``, ``adiskq.otel``,
the serializers, ``adiskq serve --kafka``, ``adiskq stats --prometheus``) imports what it needs
inside ``needs_extra(EXTRA)``; the command line shows the error as a usage error (status 2).
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Final

from ._errors import Error

__all__ = ["EXTRAS", "MissingExtraError", "needs_extra"]

# extra -> the top-level modules it installs that adiskq imports (pyproject.toml's optional-dependencies).
EXTRAS: Final[dict[str, frozenset[str]]] = {
    "kafka": frozenset({"cramjam", "kio"}),
    "kafka-cluster": frozenset({"confluent_kafka", "cramjam", "kio"}),
    "spark": frozenset({"pyspark", "pyarrow", "pandas", "py4j"}),
    "otel": frozenset({"opentelemetry"}),
    "prometheus": frozenset({"prometheus_client"}),
    "zstd": frozenset({"zstandard"}),
    "msgspec": frozenset({"msgspec"}),
    "pydantic": frozenset({"pydantic", "pydantic_core"}),
    "trio": frozenset({"trio"}),
}


class MissingExtraError(Error, ModuleNotFoundError):
    """An optional part of adiskq was used without its extra installed; the message names the
    ``pip install`` line. ``extra`` is the extra's name, ``name`` the module that is missing."""

    def __init__(self, message: str, *, extra: str, name: str | None) -> None:
        super().__init__(message, name=name)
        self.extra = extra

    def __reduce__(self) -> tuple[object, ...]:
        return _rebuild, (self.msg, self.extra, self.name)


def _rebuild(message: str, extra: str, name: str | None) -> MissingExtraError:
    return MissingExtraError(message, extra=extra, name=name)


@contextlib.contextmanager
def needs_extra(extra: str, what: str) -> Iterator[None]:
    """Turn a missing module of ``extra`` imported inside into ``MissingExtraError``; ``what``
    names the part that needs it (``"adiskq's Kafka gateway"``)."""
    try:
        yield
    except ModuleNotFoundError as error:
        if isinstance(error, MissingExtraError) or (error.name or "").split(".")[0] not in EXTRAS[extra]:
            raise
        raise MissingExtraError(
            f"{what} needs the {extra!r} extra ({error.name} is not installed): pip install 'adiskq[{extra}]'",
            extra=extra,
            name=error.name,
        ) from None
