"""ListOffsets (key 2): a partition's earliest or latest offset, or the first at or after a time.

Timestamp -2 asks for the earliest offset still kept, -1 for the latest (the next offset to be
written); a time in milliseconds for the first message stamped at or after it, found through the
partition's time index (Kafka answers offset -1 when there is none). From version 7, -3 asks for
the message with the largest timestamp (the first of those sharing it; timestamps need not be in
order, so this reads the partition's whole time index); from version 8, -4 for the earliest offset
kept locally, which is the earliest (no tiered storage); from version 9, -5 for the latest offset in
tiered storage, which is none: offset -1, as Kafka answers without tiered storage. Version 10's
timeout (for tiered storage) has nothing to wait for.

A read_committed request (isolation level 1, v2+) is answered as Kafka answers it: the latest
offset is the partition's last stable offset (the first offset of its oldest open transaction), and
a time finds only offsets before it.
"""

from __future__ import annotations

import struct
from typing import Any, Final

from kio.schema.errors import ErrorCode

from ..._errors import OffsetOutOfRangeError
from ..._sansio.codec import record_timestamp
from ..._storage.partition_reader import PartitionReader
from .._registry import RequestContext, nested, register, respond
from .._topics import check_topic_name
from .._transactions import transactions_of
from ._common import NO_THROTTLE, error_code_for

__all__ = ["list_offsets"]

_LATEST: Final = -1
_EARLIEST: Final = -2
_MAX_TIMESTAMP: Final = -3  # version 7 on
_EARLIEST_LOCAL: Final = -4  # version 8 on
_LATEST_TIERED: Final = -5  # version 9 on
_READ_COMMITTED: Final = 1
_SIZE: Final = struct.Struct("<I")  # a stored record's first field: its size


def _stored_timestamp_ns(reader: PartitionReader, offset: int) -> int:
    """The timestamp of the record at ``offset`` as stored, whatever it is (a record of a Kafka
    transaction too, which Kafka's ListOffsets finds as any other)."""
    with reader.cursor(offset) as cursor:
        run = cursor.peek_stored(1)
        if run is None:
            raise OffsetOutOfRangeError(f"offset {offset} is not written", offset=offset)
        return record_timestamp(bytes(run.data[: _SIZE.unpack_from(run.data)[0]]))


@register(2, "ListOffsets", min_version=1, max_version=10)
async def list_offsets(context: RequestContext, request: Any) -> Any:
    """The offset each partition's timestamp names."""
    topics = context.gateway.topics
    version = request.__version__
    read_committed = getattr(request, "isolation_level", 0) == _READ_COMMITTED
    open_transactions = transactions_of(context.gateway).open
    answers = []
    for topic in request.topics:
        partitions = []
        for asked in topic.partitions:
            offset = timestamp_ms = -1
            error = ErrorCode.none
            try:
                check_topic_name(topic.name)
                reader = topics.reader(topic.name).partition(asked.partition_index)
                oldest, next_offset = reader.bounds()
                if read_committed:  # never past the first record of a transaction still open
                    next_offset = open_transactions.last_stable_offset(topic.name, asked.partition_index, next_offset)
                if asked.timestamp == _LATEST:
                    offset = next_offset
                elif asked.timestamp == _EARLIEST or (asked.timestamp == _EARLIEST_LOCAL and version >= 8):
                    offset = oldest
                elif asked.timestamp == _MAX_TIMESTAMP and version >= 7:
                    newest = reader.newest_time()
                    if newest is not None:
                        offset, timestamp_ms = newest[0], newest[1] // 1_000_000
                elif asked.timestamp == _LATEST_TIERED and version >= 9:
                    pass  # no tiered storage: offset -1
                elif asked.timestamp >= 0:
                    found = reader.offset_for_time(asked.timestamp * 1_000_000)
                    if found < next_offset:
                        offset = found
                        timestamp_ms = _stored_timestamp_ns(reader, found) // 1_000_000
                else:
                    error = ErrorCode.invalid_request
            except Exception as failure:
                error = error_code_for(failure)
            partitions.append(
                nested(
                    request,
                    "ListOffsetsPartitionResponse",
                    partition_index=asked.partition_index,
                    error_code=error,
                    old_style_offsets=(),
                    timestamp=timestamp_ms,
                    offset=offset,
                    leader_epoch=0 if offset >= 0 else -1,
                )
            )
        answers.append(nested(request, "ListOffsetsTopicResponse", name=topic.name, partitions=tuple(partitions)))
    return respond(request, "ListOffsetsResponse", throttle_time=NO_THROTTLE, topics=tuple(answers))
