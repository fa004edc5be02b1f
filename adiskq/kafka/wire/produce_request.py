"""A Produce request's payload read in one call: what the Kafka gateway's Produce uses of it.

``produce_request(message, at, version)`` reads the ProduceRequest of ``version`` (3..12, the
versions the gateway serves) that starts at ``message[at]`` (after the request header and its tagged
fields) and answers ``(transactional_id, acks, timeout_ms, topics)``, ``topics`` a list of
``(name, partitions)`` and each partition ``(index, records)``: ``records`` the partition's record
batches as they came (bytes), or None for a null record set. Bytes after the payload are ignored,
as Kafka ignores them.

None means "not here": the bytes are cut short or malformed (a negative length other than a
nullable field's null, a count or length larger than the bytes left, a null topic name, a name or
transactional id that is not UTF-8, a varint longer than 5 bytes or above 32 bits), or a tagged
field is present, which only kio's generated reader knows how to read (ProduceRequest defines none
up to version 12; no client sends one). The gateway then reads the request with kio, after the
request guard (``wire/request_guard.py``), which raises the error that names the faulty field, or reads
it. The compiled core's ``kafka_produce_request`` (``adiskq/_csrc/kafka/produce_request.c``) answers
the same; this is its reference (``produce_request_reference``), and the tests hold the two equal,
and equal to what kio reads, for any bytes. The payload, from Kafka's ``ProduceRequest.json``
(``[X]``: an array of X)::

    transactional_id: nullable string, acks: i16, timeout_ms: i32,
    [topic]        name: string; [partition]; tags (v9+)
      partition    index: i32, records: nullable records (the record batches' bytes); tags (v9+)
    tags (v9+)

Versions 9 and up (flexible) write an array's, a string's or a record set's length as an unsigned
varint of length + 1 (0: null) and end each structure with its tagged fields (a varint count, 0 for
none); older ones an i32 (arrays, records) or i16 (strings) length, -1 for null. The request's
fields are the same in every version from 3 to 12 (the versions differ in their answers; 12, KIP-890's
transaction version 2, differs only in what a transactional producer's request means), so only that
encoding depends on the version here. (Version 13 names topics by id; the gateway does not serve it.)
"""

from __future__ import annotations

from typing import Final

from ..._sansio.native import NATIVE
from .request_reader import I16, I32, Cut, RequestReader, check_request_arguments

__all__ = ["PRODUCE_REQUEST_VERSIONS", "ProduceAskedFor", "produce_request", "produce_request_reference"]

PRODUCE_REQUEST_VERSIONS: Final = range(3, 13)
_FLEXIBLE: Final = 9

# (transactional_id, acks, timeout_ms, [(name, [(index, records)])])
ProduceAskedFor = tuple[str | None, int, int, list[tuple[str, list[tuple[int, bytes | None]]]]]


def produce_request_reference(message: bytes, at: int, version: int) -> ProduceAskedFor | None:
    """The Produce request's fields (see the module's docstring); None when the bytes are not one
    this reader takes. TypeError or ValueError for arguments outside its contract."""
    check_request_arguments("produce_request", message, at, version, PRODUCE_REQUEST_VERSIONS)
    reader = RequestReader(message, at, version >= _FLEXIBLE)
    try:
        transactional_id = reader.nullable_string()
        acks = reader.fixed(I16)
        timeout_ms = reader.fixed(I32)
        topics: list[tuple[str, list[tuple[int, bytes | None]]]] = []
        for _ in range(reader.count()):
            name = reader.string()
            partitions = []
            for _ in range(reader.count()):
                index = reader.fixed(I32)
                length = reader.length(I32)
                records = None if length < 0 else reader.take(length)
                reader.no_tags()
                partitions.append((index, records))
            reader.no_tags()
            topics.append((name, partitions))
        reader.no_tags()
    except Cut:
        return None
    return transactional_id, acks, timeout_ms, topics


def produce_request(message: bytes, at: int, version: int) -> ProduceAskedFor | None:
    """``produce_request_reference``, by the compiled core when it is built."""
    if NATIVE is None:
        return produce_request_reference(message, at, version)
    asked: ProduceAskedFor | None = NATIVE.kafka_produce_request(message, at, version)
    return asked
