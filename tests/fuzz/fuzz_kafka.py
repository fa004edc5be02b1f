"""A coverage-guided fuzzer (atheris) over the compiled Kafka record batch decoder.

Each input is a Produce request's records field as a hostile client could send it: the compiled
decoder must answer exactly as the pure-Python reference (``adiskq/_sansio/kafka_codec.py``) does —
the same batches, or the same error at the same byte — and never crash, over-read or hang.
Coverage guides the search through the reference's Python, whose checks the C mirrors.

    python tests/fuzz/fuzz_kafka.py -max_total_time=60          # a minute

Run by tests/fuzz/test_fuzz.py for a bounded time, and by scripts/sanitize under AddressSanitizer
and UndefinedBehaviorSanitizer.
"""

from __future__ import annotations

import struct
import sys

import atheris

with atheris.instrument_imports(include=["adiskq._sansio.kafka_codec"]):
    from adiskq._sansio import kafka_codec as reference

from adiskq import _compiled
from adiskq._sansio import kafka_batch
from adiskq._sansio.kafka_batch import KafkaBatch, KafkaRecord

_LIMITS = (reference.DEFAULT_MAX_BYTES, 0, 64, 4096)


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


def main() -> None:
    if not kafka_batch.COMPILED:
        raise SystemExit("the compiled core is not in use (built? ADISKQ_NO_EXTENSIONS set?): nothing to fuzz")
    atheris.Setup(sys.argv, test_one_input)
    atheris.Fuzz()


if __name__ == "__main__":
    main()
