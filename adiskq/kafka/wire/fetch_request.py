"""A Fetch request's payload read in one call: what the Kafka gateway's Fetch uses of it.

``fetch_request(message, at, version)`` reads the FetchRequest of ``version`` (4..16) that starts at
``message[at]`` (after the request header and its tagged fields) and answers
``(max_wait_ms, min_bytes, max_bytes, isolation_level, topics)`` (``isolation_level`` 0 for
read_uncommitted, 1 for read_committed), ``topics`` a list of ``(topic, partitions)`` —
``topic`` the name (str) up to version 12, the topic id's 16 bytes from version 13 on — and each
partition ``(partition, fetch_offset, partition_max_bytes)``. Every other field is read past (and
must be there); bytes after the payload are ignored, as Kafka ignores them.

None means "not here": the bytes are cut short or malformed (a negative or null length, a name that
is not UTF-8, a varint longer than 5 bytes), or a tagged field is present, which only kio's
generated reader knows how to read (none is sent by the clients the gateway serves: the tags a
Fetch may carry are ClusterId, ReplicaState and ReplicaDirectoryId, for brokers). The gateway then
reads the request with kio, which raises the error that names the fault, or reads it. The compiled
core's ``kafka_fetch_request`` (``adiskq/_csrc/kafka/fetch_request.c``) answers the same; this is its
reference (``fetch_request_reference``), and the tests hold the two equal, and equal to what kio
reads, for any bytes. The payload, from Kafka's ``FetchRequest.json`` (``[X]``: an array of X)::

    replica_id: i32 (v4..v14), max_wait_ms: i32, min_bytes: i32, max_bytes: i32, isolation_level: i8,
    session_id: i32 (v7+), session_epoch: i32 (v7+),
    [topic]        topic: string (v4..v12) | topic_id: 16 bytes (v13+); [partition]; tags (v12+)
      partition    partition: i32, current_leader_epoch: i32 (v9+), fetch_offset: i64,
                   last_fetched_epoch: i32 (v12+), log_start_offset: i64 (v5+),
                   partition_max_bytes: i32; tags (v12+)
    [forgotten]    (v7+) topic: string | topic_id: 16 bytes (v13+); partitions: [i32]; tags (v12+)
    rack_id: string (v11+); tags (v12+)

Versions 12 and up (flexible) write an array's or a string's length as an unsigned varint of
length + 1 (0: null) and end each structure with its tagged fields (a varint count, 0 for none);
older ones an i32 (arrays) or i16 (strings) length.
"""

from __future__ import annotations

from typing import Final

from ..._sansio.native import NATIVE
from .request_reader import I8, I32, I64, Cut, RequestReader, check_request_arguments

__all__ = ["FETCH_REQUEST_VERSIONS", "FetchAskedFor", "fetch_request", "fetch_request_reference"]

FETCH_REQUEST_VERSIONS: Final = range(4, 17)
_FLEXIBLE: Final = 12
_TOPIC_IDS: Final = 13

# (max_wait_ms, min_bytes, max_bytes, isolation_level,
#  [(topic, [(partition, fetch_offset, partition_max_bytes)])])
FetchAskedFor = tuple[int, int, int, int, list[tuple[str | bytes, list[tuple[int, int, int]]]]]


def fetch_request_reference(message: bytes, at: int, version: int) -> FetchAskedFor | None:
    """The Fetch request's fields (see the module's docstring); None when the bytes are not one
    this reader takes. TypeError or ValueError for arguments outside its contract."""
    check_request_arguments("fetch_request", message, at, version, FETCH_REQUEST_VERSIONS)
    reader = RequestReader(message, at, version >= _FLEXIBLE)
    by_id = version >= _TOPIC_IDS
    try:
        if version <= 14:
            reader.fixed(I32)  # replica_id
        max_wait_ms = reader.fixed(I32)
        min_bytes = reader.fixed(I32)
        max_bytes = reader.fixed(I32)
        isolation_level = reader.fixed(I8)
        if version >= 7:
            reader.take(8)  # session_id, session_epoch
        topics: list[tuple[str | bytes, list[tuple[int, int, int]]]] = []
        for _ in range(reader.count()):
            topic: str | bytes = reader.take(16) if by_id else reader.string()
            partitions = []
            for _ in range(reader.count()):
                partition = reader.fixed(I32)
                if version >= 9:
                    reader.take(4)  # current_leader_epoch
                fetch_offset = reader.fixed(I64)
                if version >= 12:
                    reader.take(4)  # last_fetched_epoch
                if version >= 5:
                    reader.take(8)  # log_start_offset
                partition_max_bytes = reader.fixed(I32)
                reader.no_tags()
                partitions.append((partition, fetch_offset, partition_max_bytes))
            reader.no_tags()
            topics.append((topic, partitions))
        if version >= 7:
            for _ in range(reader.count()):  # forgotten_topics_data: read past
                reader.take(16) if by_id else reader.string()
                reader.take(4 * reader.count())
                reader.no_tags()
        if version >= 11:
            reader.string()  # rack_id
        reader.no_tags()
    except Cut:
        return None
    return max_wait_ms, min_bytes, max_bytes, isolation_level, topics


def fetch_request(message: bytes, at: int, version: int) -> FetchAskedFor | None:
    """``fetch_request_reference``, by the compiled core when it is built."""
    if NATIVE is None:
        return fetch_request_reference(message, at, version)
    asked: FetchAskedFor | None = NATIVE.kafka_fetch_request(message, at, version)
    return asked
