"""adiskq speaks Kafka: ``KafkaGateway`` serves the streams under a folder to any Kafka client.

Layers, as in the rest of adiskq: ``_protocol`` (frames and headers, payloads through kio; no I/O;
``_request_guard`` checks a request's counts and lengths before kio reads it),
``apis/`` (one module per API, request in, response out, registered in ``_registry``),
``_topics``/``_records``/``_fetching``/``_idempotence`` (topics as streams, the record mapping, the
long poll, producer sequences), and ``_server`` (connections on AnyIO).
"""

from .._extras import needs_extra

with needs_extra("kafka", "adiskq's Kafka gateway"):
    from ._options import GroupOptions as GroupOptions
    from ._options import SecurityOptions as SecurityOptions
    from ._server import DEFAULT_MAX_REQUEST_BYTES as DEFAULT_MAX_REQUEST_BYTES
    from ._server import KafkaGateway as KafkaGateway

__all__ = ["DEFAULT_MAX_REQUEST_BYTES", "GroupOptions", "KafkaGateway", "SecurityOptions"]
