"""adiskq speaks Kafka: ``KafkaGateway`` serves the streams under a folder to any Kafka client.

Layers, as in the rest of adiskq: ``wire.protocol`` (frames and headers, payloads through kio; no I/O;
``wire.request_guard`` checks a request's counts and lengths before kio reads it),
``apis/`` (one module per API, request in, response out, registered in ``_registry``),
``_topics``/``_records``/``_fetching``/``_idempotence`` (topics as streams, the record mapping, the
long poll, producer sequences), and ``_server`` (connections on AnyIO). ``Mirror`` (``mirror.py``
and the ``_mirror_*`` modules) ships a stream to a Kafka cluster and back, through confluent-kafka.
"""

from typing import TYPE_CHECKING

from .._extras import needs_extra

with needs_extra("kafka", "adiskq's Kafka gateway"):
    from ._options import GroupOptions as GroupOptions
    from ._options import SecurityOptions as SecurityOptions
    from ._server import DEFAULT_MAX_REQUEST_BYTES as DEFAULT_MAX_REQUEST_BYTES
    from ._server import KafkaGateway as KafkaGateway

if TYPE_CHECKING:
    from .mirror import Mirror as Mirror

__all__ = ["DEFAULT_MAX_REQUEST_BYTES", "GroupOptions", "KafkaGateway", "Mirror", "SecurityOptions"]


def __getattr__(name: str) -> object:
    # The mirror loads on first use: it needs confluent-kafka (the kafka-cluster extra), the gateway does not.
    if name == "Mirror":
        with needs_extra("kafka-cluster", "adiskq's Kafka mirror"):
            from .mirror import Mirror

        return Mirror
    raise AttributeError(f"module 'adiskq.kafka' has no attribute {name!r}")
