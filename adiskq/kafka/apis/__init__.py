"""The requests the gateway answers, one module per API (request in, response out).

Importing this package registers every handler in ``adiskq.kafka._registry.API_TABLE``; how a
handler is written and registered is in that module's docstring. Add a module here and import it
below to answer one more API.
"""

from . import (
    alter_configs,
    api_versions,
    create_partitions,
    create_topics,
    delete_groups,
    delete_records,
    delete_topics,
    describe_configs,
    describe_groups,
    fetch,
    find_coordinator,
    heartbeat,
    incremental_alter_configs,
    init_producer_id,
    join_group,
    leave_group,
    list_groups,
    list_offsets,
    metadata,
    offset_commit,
    offset_delete,
    offset_fetch,
    produce,
    sasl_authenticate,
    sasl_handshake,
    sync_group,
)

__all__ = [
    "alter_configs",
    "api_versions",
    "create_partitions",
    "create_topics",
    "delete_groups",
    "delete_records",
    "delete_topics",
    "describe_configs",
    "describe_groups",
    "fetch",
    "find_coordinator",
    "heartbeat",
    "incremental_alter_configs",
    "init_producer_id",
    "join_group",
    "leave_group",
    "list_groups",
    "list_offsets",
    "metadata",
    "offset_commit",
    "offset_delete",
    "offset_fetch",
    "produce",
    "sasl_authenticate",
    "sasl_handshake",
    "sync_group",
]
