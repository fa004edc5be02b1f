"""Kafka topic configs <-> a stream's settings: what CreateTopics, DescribeConfigs, AlterConfigs and
IncrementalAlterConfigs read and write.

| Kafka config          | the stream's setting                          | -1                 |
|-----------------------|-----------------------------------------------|--------------------|
| ``retention.ms``      | ``Retention.max_age``                         | no age limit       |
| ``retention.bytes``   | ``Retention.max_bytes`` (per partition, as in Kafka) | no size limit |
| ``segment.bytes``     | ``segment_size_bytes``                        |                    |
| ``max.message.bytes`` | ``max_message_bytes``                         |                    |

``cleanup.policy=delete``, ``compression.type=producer`` and ``message.timestamp.type=CreateTime``
are what every stream does, so they are accepted (and described) as such; any other value of them
(``compact``: adiskq keeps no latest-value-per-key log), and any other config name, is refused with
INVALID_CONFIG naming it, before anything changes. A setting not given keeps the stream's (for
IncrementalAlterConfigs SET) or returns to adiskq's default (AlterConfigs, which replaces the whole
set as Kafka's does, and IncrementalAlterConfigs DELETE).
"""

from __future__ import annotations

import dataclasses
import datetime as dt
from collections.abc import Mapping
from typing import Final

from .._errors import InvalidArgumentError
from .._sansio.values import Retention
from .._storage.settings import AskedSettings, StreamSettings

__all__ = ["DEFAULTS", "FIXED", "InvalidConfigError", "describe_topic", "replaced", "settings_for"]

_DEFAULT_SETTINGS: Final = StreamSettings()
# What every stream does: accepted with this value only.
FIXED: Final = {"cleanup.policy": "delete", "compression.type": "producer", "message.timestamp.type": "CreateTime"}
_WHY_FIXED: Final = {
    "cleanup.policy": "adiskq deletes whole segments by age and size; it keeps no compacted log (compact)",
    "compression.type": "a stream stores the batches' records as producers send them",
    "message.timestamp.type": "a stream keeps each record's own timestamp (CreateTime)",
}


class InvalidConfigError(ValueError):
    """A topic config adiskq cannot honour (answered INVALID_CONFIG)."""


def describe_topic(settings: StreamSettings) -> dict[str, str]:
    """The stream's settings as Kafka topic configs."""
    retention = settings.retention
    max_age = retention.max_age
    return {
        **FIXED,
        "max.message.bytes": str(settings.max_message_bytes),
        "retention.bytes": str(-1 if retention.max_bytes is None else retention.max_bytes),
        "retention.ms": str(-1 if max_age is None else int(max_age / dt.timedelta(milliseconds=1))),
        "segment.bytes": str(settings.segment_size_bytes),
    }


DEFAULTS: Final = describe_topic(_DEFAULT_SETTINGS)


def _number(name: str, value: str) -> int:
    try:
        return int(value.strip())
    except ValueError:
        raise InvalidConfigError(f"{name}={value!r}: give a whole number") from None


def _limit(name: str, value: str) -> int | None:
    """A ``retention.*`` value: a positive number, or -1 for none."""
    number = _number(name, value)
    if number == -1:
        return None
    if number <= 0:
        raise InvalidConfigError(f"{name}={value}: give a positive number, or -1 for no limit")
    return number


def settings_for(configs: Mapping[str, str | None], base: StreamSettings) -> dict[str, object]:
    """The stream settings (``segment_size_bytes``, ``retention``, ``max_message_bytes``) that
    ``configs`` ask for over ``base``, checked; a None value returns that config to its default.
    InvalidConfigError names the first config that cannot be honoured."""
    retention = base.retention
    segment_size = base.segment_size_bytes
    max_message = base.max_message_bytes
    for name, given in configs.items():
        value = DEFAULTS.get(name) if given is None else given
        if name in FIXED:
            if value is not None and value.strip() != FIXED[name]:
                raise InvalidConfigError(f"{name}={value} is not available: {_WHY_FIXED[name]}")
        elif name == "retention.ms":
            assert value is not None
            age = _limit(name, value)
            retention = dataclasses.replace(retention, max_age=None if age is None else dt.timedelta(milliseconds=age))
        elif name == "retention.bytes":
            assert value is not None
            retention = dataclasses.replace(retention, max_bytes=_limit(name, value))
        elif name == "segment.bytes":
            assert value is not None
            segment_size = _number(name, value)
        elif name == "max.message.bytes":
            assert value is not None
            max_message = _number(name, value)
        else:
            raise InvalidConfigError(
                f"topic config {name!r} is not available here: a topic takes "
                + ", ".join(sorted([*FIXED, "max.message.bytes", "retention.bytes", "retention.ms", "segment.bytes"]))
            )
    settings: dict[str, object] = {
        "segment_size_bytes": segment_size,
        "retention": retention,
        "max_message_bytes": max_message,
    }
    try:  # the stream's own checks of its settings, before anything is created or changed
        AskedSettings(None, segment_size, retention, max_message, None, None).applied_to(base)
    except InvalidArgumentError as error:
        message = str(error).replace("segment_size_bytes=", "segment.bytes=")
        raise InvalidConfigError(message.replace("max_message_bytes=", "max.message.bytes=")) from None
    return settings


def replaced(configs: Mapping[str, str | None], base: StreamSettings) -> dict[str, object]:
    """``settings_for`` as AlterConfigs means it: every config not given returns to its default
    (``max_disk_usage``, which Kafka has no config for, stays the stream's)."""
    defaults = dataclasses.replace(
        base,
        segment_size_bytes=_DEFAULT_SETTINGS.segment_size_bytes,
        max_message_bytes=_DEFAULT_SETTINGS.max_message_bytes,
        retention=Retention(max_disk_usage=base.retention.max_disk_usage),
    )
    return settings_for(configs, defaults)
