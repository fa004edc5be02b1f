"""The compiled Kafka codec leaks no references: a million records encoded, decoded, mapped to
adiskq's stored records and back to batches (and tens of thousands of damaged batches refused, and
arguments refused) leave the process's memory where it was."""

from __future__ import annotations

import contextlib

from support.compression import stream_dictionary
from support.memory import growth_over

from adiskq import _compiled
from adiskq._sansio.codec import encode_record
from adiskq._sansio.compression import COMPRESSED, DICTIONARY_ID_BASE
from adiskq.kafka.wire.batch import KafkaBatch, KafkaBatchError, KafkaRecord, decode_batches, encode_batch
from adiskq.kafka.wire.mapping import NULLS_HEADER

ROUND = 100_000
PER_BATCH = 1000
VALUE = bytes(range(100))
compressed = encode_record(b"\x00" * 20, b"k", 1, None, COMPRESSED)  # a "frame" no dictionary holds
PREPARED = _compiled.zstd_prepare(stream_dictionary(), 3)
PACKED = encode_record(_compiled.zstd_compress(PREPARED, VALUE), b"k", 1, None, COMPRESSED) * 100


def one_round() -> None:
    records = [KafkaRecord(i, 1_700_000_000_000 + i, b"key-%06d" % i, VALUE, []) for i in range(PER_BATCH)]
    with_headers = [r._replace(headers=[("type", b"x"), ("type", None), ("é", b"")]) for r in records[:100]]
    data = b"".join(
        encode_batch(base_offset=start, records=records, base_timestamp_ms=1_700_000_000_000)
        for start in range(0, ROUND, PER_BATCH)
    )
    batches = decode_batches(data)
    assert sum(len(batch.records) for batch in batches) == ROUND
    # The same records as adiskq's stored records (a Produce's plain path), a batch a call.
    stored = 0
    size = len(data) // (ROUND // PER_BATCH)  # the batches differ only in their base offsets
    for start in range(0, len(data), size):
        found = _compiled.kafka_stored_records(data, start + 61, start + size, PER_BATCH, 1, 1, NULLS_HEADER)
        stored += len(found[1]) // 24  # an .index entry a record
    assert stored == ROUND
    # ...and stored records straight back to batches (a Fetch's plain path), and runs it refuses.
    run = found[0]
    first_size = int.from_bytes(found[1][16:24], "little")
    for start in range(0, ROUND, PER_BATCH):  # ...and its entries placed where a write puts them
        assert _compiled.place_entries(found[0], found[1], found[2], b"", start, start * first_size)
    for start in range(0, ROUND, PER_BATCH):
        assert _compiled.kafka_batch_from_stored(run, start, PER_BATCH, 2**20, None, NULLS_HEADER, 0)
    assert decode_batches(encode_batch(base_offset=0, records=with_headers, base_timestamp_ms=0))[0].records
    assert decode_batches(encode_batch(base_offset=0, records=records[:50], base_timestamp_ms=0, compression=4))
    refused = encode_batch(
        base_offset=0, records=[*records[:49], with_headers[49], *records[50:60]], base_timestamp_ms=0
    )
    head = data[:200_000]
    damaged = bytearray(head)
    damaged[70] ^= 0xFF  # past the CRC: a corrupt batch
    for _ in range(300):
        with contextlib.suppress(KafkaBatchError):
            decode_batches(bytes(damaged))
        # Records that end early: the compiled decoder builds some of them, then lets go of them.
        assert _compiled.kafka_decode_records(data, 61, 61 + 5000, 50, 0, KafkaRecord) is None
        # Whole batches decoded, then a partial one: the decoded ones are let go of.
        assert _compiled.kafka_decode_batches(head, 2**30, KafkaRecord, KafkaBatch) is None
        assert _compiled.kafka_encode_batch(0, [records[0], records[0]], 0, -1, -1, -1, 0) is NotImplemented
        assert _compiled.kafka_encode_batch(0, [records[0]._replace(key="text")], 0, -1, -1, -1, 0) is NotImplemented
        # Records refused part way (a repeated header name in the 50th): those made before are let go of.
        assert _compiled.kafka_stored_records(refused, 61, len(refused), 50, 0, 1, NULLS_HEADER) is None
        assert _compiled.kafka_stored_records(data, 61, 61 + 5000, 50, 0, 1, NULLS_HEADER) is None
        # A run refused part way (a damaged last record; a compressed value with no dictionary).
        assert _compiled.kafka_batch_from_stored(run[:-1], 0, 100, 2**20, None, NULLS_HEADER, 0) is None
        assert _compiled.kafka_batch_from_stored(run[: 50 * first_size] + compressed, 0, 51, 2**20, {}, None, 0) is None
        with contextlib.suppress(ValueError):
            _compiled.kafka_batch_from_stored(run, -1, 1, 2**20, None, NULLS_HEADER, 0)
        # Entries that disagree with their run: refused after reading them, nothing made.
        with contextlib.suppress(ValueError):
            _compiled.place_entries(run, found[1], found[2][:-16], b"", 0, 0)
        with contextlib.suppress(ValueError):
            _compiled.place_entries(run[:-1], found[1], found[2], b"", 0, 0)
        # Compressed values, decompressed into the batch.
        assert _compiled.kafka_batch_from_stored(PACKED, 0, 100, 2**20, {DICTIONARY_ID_BASE + 1: PREPARED}, None, 0)
        surrogate = [records[1], records[2]._replace(headers=[("\ud800", None)])]
        assert _compiled.kafka_encode_records(surrogate, 0) is NotImplemented


def test_a_million_kafka_records_leave_memory_flat() -> None:
    """Ten rounds of 100,000 records encoded and decoded, and errors on every path, grow memory by less than 4 MiB."""
    grown = growth_over(one_round, rounds=10)
    # A leaked bytes object or int per record would be 30 MiB or more; allocator noise is far less.
    assert grown < 4 * 2**20, f"memory grew by {grown / 2**20:.1f} MiB over a million records"
