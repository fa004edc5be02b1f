"""The mirror's Kafka end: a ``kafka://`` URL and a client configuration file, checked; no I/O but the file.

A URL names brokers and a topic only: ``kafka://HOST:PORT[,HOST:PORT...]/TOPIC``. Credentials are
refused there (URLs end up in shell histories, process lists and logs): they go in the
configuration file, librdkafka's or the Java client's properties (``key=value`` or ``key: value``
lines; ``#`` and ``!`` start comments). Of the Java-only keys, ``sasl.jaas.config`` is read for its
``username`` and ``password``; every other key is passed to librdkafka as it is, which refuses the
ones it does not know.
"""

from __future__ import annotations

import os
import re
from typing import Final, NamedTuple

from .._errors import InvalidArgumentError

__all__ = ["KAFKA_SCHEME", "KafkaEnd", "is_kafka_url", "parse_kafka_url", "read_client_config"]

KAFKA_SCHEME: Final = "kafka://"
# Kafka's legal topic names: letters, digits, '.', '_' and '-', at most 249 characters.
_TOPIC: Final = re.compile(r"[A-Za-z0-9._-]{1,249}")
_HOST_PORT: Final = re.compile(r"(\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9._-]+):([0-9]{1,5})")
_JAAS_FIELD: Final = re.compile(r"""\b(username|password)\s*=\s*"((?:[^"\\]|\\.)*)\"""")


class KafkaEnd(NamedTuple):
    """A topic on a Kafka cluster, as a ``kafka://`` URL names it."""

    bootstrap: str  # "host:port,host:port", librdkafka's bootstrap.servers
    topic: str

    @property
    def url(self) -> str:
        return f"{KAFKA_SCHEME}{self.bootstrap}/{self.topic}"


def is_kafka_url(value: object) -> bool:
    """Whether ``value`` is a string naming a Kafka topic (``kafka://...``) rather than a stream's path."""
    return isinstance(value, str) and value.startswith(KAFKA_SCHEME)


def parse_kafka_url(url: str) -> KafkaEnd:
    """The brokers and topic of ``kafka://HOST:PORT[,HOST:PORT...]/TOPIC``; InvalidArgumentError says what is wrong."""
    if not is_kafka_url(url):
        raise InvalidArgumentError(f"{url!r} is not a Kafka URL: write kafka://HOST:PORT[,HOST:PORT...]/TOPIC")
    rest = url[len(KAFKA_SCHEME) :]
    hosts, slash, topic = rest.partition("/")
    if "@" in hosts:
        raise InvalidArgumentError(
            f"{url!r} holds credentials: give them in a client configuration file (--kafka-config FILE, or "
            "kafka_config=), never in the URL, which shells, process lists and logs keep"
        )
    if not slash or not topic:
        raise InvalidArgumentError(f"{url!r} names no topic: write kafka://HOST:PORT[,HOST:PORT...]/TOPIC")
    if _TOPIC.fullmatch(topic) is None or topic in (".", ".."):
        raise InvalidArgumentError(
            f"topic {topic!r} is not a legal Kafka topic name: letters, digits, '.', '_' and '-', at most 249"
        )
    brokers = hosts.split(",")
    for broker in brokers:
        match = _HOST_PORT.fullmatch(broker)
        if match is None or not 0 < int(match.group(2)) < 65536:
            raise InvalidArgumentError(f"{broker!r} in {url!r} is not HOST:PORT (a port from 1 to 65535)")
    return KafkaEnd(",".join(brokers), topic)


def read_client_config(path: str | os.PathLike[str]) -> dict[str, str]:
    """The client configuration in a properties file (see the module's docstring)."""
    config: dict[str, str] = {}
    try:
        with open(path, encoding="utf-8") as file:
            lines = file.read().splitlines()
    except OSError as error:
        raise InvalidArgumentError(f"cannot read the Kafka client configuration {os.fspath(path)!r}: {error}") from None
    for number, raw in enumerate(lines, 1):
        line = raw.strip()
        if not line or line[0] in "#!":
            continue
        match = re.match(r"([^=:\s]+)\s*[=:]\s*(.*)$", line)
        if match is None:
            raise InvalidArgumentError(
                f"{os.fspath(path)}:{number}: {line[:40]!r} is not a property: write key=value (librdkafka's names)"
            )
        key, value = match.group(1), match.group(2)
        if key == "sasl.jaas.config":
            for field, field_value in _JAAS_FIELD.findall(value):
                config[f"sasl.{field}"] = field_value.replace('\\"', '"').replace("\\\\", "\\")
            continue
        config[key] = value
    return config
