"""A coverage-guided fuzzer (atheris) over the compiled Kafka record batch decoder.

Each input is a Produce request's records field as a hostile client could send it: the compiled
decoder must answer exactly as the pure-Python reference (``adiskq/kafka/wire/codec.py``) does —
the same batches, or the same error at the same byte — and never crash, over-read or hang. The
same bytes as a records section go through ``kafka_stored_records`` (the same run of stored records
as ``wire.mapping.stored_records_reference``, or None alike), the run it makes, and the bytes cut
in three as a run's data and entries, through ``place_entries`` (the same entries as
``run_entries.place_entries_reference``, or the same error); and the records field whole
through ``kafka_decode_batches`` with runs (a Produce's write: the batches of the reference with
runs for records, when it answers at all).
Coverage guides the search through the reference's Python, whose checks the C mirrors.

    python tests/fuzz/fuzz_kafka.py -max_total_time=60          # a minute

Run by tests/fuzz/test_fuzz.py for a bounded time, and by scripts/sanitize under AddressSanitizer
and UndefinedBehaviorSanitizer.
"""

from __future__ import annotations

import struct
import sys

import atheris

with atheris.instrument_imports(
    include=["adiskq.kafka.wire.codec", "adiskq.kafka.wire.mapping", "adiskq._sansio.run_entries"]
):
    from adiskq._sansio.entries import EncodedRun
    from adiskq._sansio.run_entries import place_entries_reference
    from adiskq.kafka.wire import codec as reference
    from adiskq.kafka.wire.mapping import NULLS_HEADER, stored_records_reference

from adiskq import _compiled
from adiskq.kafka.wire import batch as kafka_batch
from adiskq.kafka.wire.batch import KafkaBatch, KafkaRecord

_LIMITS = (reference.DEFAULT_MAX_BYTES, 0, 64, 4096)
_NOW = 1_800_000_000_123_456_789


def _outcome(call):  # type: ignore[no-untyped-def]
    try:
        return call()
    except reference.KafkaBatchError as error:
        return (type(error).__name__, str(error), error.position)


def _seeded(raw: bytes) -> bytes:
    """Half the inputs are a valid batch whose records section is the fuzzer's bytes (CRC right), so
    the record checks are reached as often as the framing's."""
    if not raw or raw[0] & 1 == 0:
        return raw
    section = raw[1:]
    count = raw[0] >> 4
    header = struct.pack(">qiibIhiqqqhii", 0, 49 + len(section), 0, 2, 0, 0, count, 1000, 1000, -1, -1, -1, count)
    batch = bytearray(header + section)
    struct.pack_into(">I", batch, reference.CRC_AT, reference.crc32c(bytes(batch[reference.ATTRIBUTES_AT :])))
    return bytes(batch)


def _stored(buf, pos, end, count, base_timestamp_ms, where):  # type: ignore[no-untyped-def]
    """The reference's records decoder of a Produce's write: a run of stored records, or the fault."""
    found = stored_records_reference(buf, pos, end, count, base_timestamp_ms, _NOW)
    if found is None:
        raise reference.KafkaBatchError(f"{where}: off the plain path", position=pos)
    return found


def _placed(call):  # type: ignore[no-untyped-def]
    try:
        return call()
    except ValueError as error:
        return (type(error).__name__, str(error))


def _check_run(raw: bytes) -> None:
    """The records section as a run, and the bytes as a run's columns, in both implementations."""
    count = raw[0] % 16
    run = _compiled.kafka_stored_records(raw, 1, len(raw), count, 5, _NOW, NULLS_HEADER)
    expected = stored_records_reference(raw, 1, len(raw), count, 5, _NOW)
    if expected is None:
        if run is not None:
            raise AssertionError(f"compiled run {run!r} != reference None for {raw!r}")
    elif run != tuple(expected):
        raise AssertionError(f"compiled run {run!r} != reference {expected!r} for {raw!r}")
    third = len(raw) // 3
    columns = [(raw[:third], raw[third : 2 * third], raw[2 * third :])]
    if run is not None:
        columns.append(run[:3])
    for data, index, timeindex in columns:
        got = _placed(lambda: _compiled.place_entries(data, index, timeindex, b"", raw[0], len(raw)))  # noqa: B023
        want = _placed(lambda: place_entries_reference(data, index, timeindex, b"", raw[0], len(raw)))  # noqa: B023
        if got != want:
            raise AssertionError(f"compiled placement {got!r} != reference {want!r} for {raw!r}")


def test_one_input(raw: bytes) -> None:
    if len(raw) < 2:
        return
    limit = _LIMITS[raw[0] % len(_LIMITS)]
    data = _seeded(raw[1:])
    got = _outcome(lambda: kafka_batch.decode_batches(data, max_bytes=limit))
    want = _outcome(lambda: reference.decode_batches(data, max_bytes=limit))
    if got != want:
        raise AssertionError(f"compiled {got!r} != reference {want!r} for {raw!r}")
    direct = _compiled.kafka_decode_batches(data, limit, KafkaRecord, KafkaBatch)
    if direct is not None and direct != want:
        raise AssertionError(f"compiled batches {direct!r} != reference {want!r} for {raw!r}")
    records = _compiled.kafka_decode_records(raw, 1, len(raw), raw[0] % 16, -1, KafkaRecord)
    expected = _outcome(lambda: reference.decode_records(raw, 1, len(raw), raw[0] % 16, -1, "batch 0"))
    if (records is None) != (not isinstance(expected, list)) or (records is not None and records != expected):
        raise AssertionError(f"compiled records {records!r} != reference {expected!r} for {raw!r}")
    _check_run(raw)
    runs = _compiled.kafka_decode_batches(data, limit, KafkaRecord, KafkaBatch, _NOW, NULLS_HEADER, EncodedRun)
    if runs is not None:  # the reference, its records mapped the same way (the batches, or the fault)
        expected_runs = _outcome(lambda: reference.decode_batches(data, max_bytes=limit, records_decoder=_stored))
        if runs != expected_runs:
            raise AssertionError(f"compiled runs {runs!r} != reference {expected_runs!r} for {raw!r}")


def main() -> None:
    if not kafka_batch.COMPILED:
        raise SystemExit("the compiled core is not in use (built? ADISKQ_NO_EXTENSIONS set?): nothing to fuzz")
    atheris.Setup(sys.argv, test_one_input)
    atheris.Fuzz()


if __name__ == "__main__":
    main()
