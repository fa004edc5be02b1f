"""The requests the gateway answers, one module per API (request in, response out).

Importing this package registers every handler in ``adiskq.kafka._registry.API_TABLE``; how a
handler is written and registered is in that module's docstring. Add a module here and import it
below to answer one more API.
"""

from . import (
    api_versions,
    create_partitions,
    create_topics,
    delete_topics,
    describe_configs,
    fetch,
    init_producer_id,
    list_offsets,
    metadata,
    produce,
)

__all__ = [
    "api_versions",
    "create_partitions",
    "create_topics",
    "delete_topics",
    "describe_configs",
    "fetch",
    "init_producer_id",
    "list_offsets",
    "metadata",
    "produce",
]
