"""A coverage-guided fuzzer (atheris, libFuzzer's engine) over the compiled core's parsers.

Each input is a buffer of bytes from disk, as a damaged or hostile ``.data`` file would hold: the
compiled decoder, scan, search for the next valid record and Kafka record batch of stored records
(a Fetch's) must answer exactly as the pure-Python reference does (the same messages, the same error
at the same position, the same batch or None) and never crash. Some seeded inputs hold values in
plain zstd frames (a compressed stream's values before its first dictionary), decoded by both cores
with the stream's dictionaries (none: frames that name one are damage here), and some are a
Kafka transaction's records and markers, or keyless pushes' (served with a null key). Coverage
guides the search through the reference's Python (atheris instruments it; gcc, which builds the
core, has no libFuzzer instrumentation), so inputs reach every check the C mirrors.

    python tests/fuzz/fuzz_codec.py -max_total_time=60          # a minute
    python tests/fuzz/fuzz_codec.py -runs=100000 corpus_dir/    # with a corpus

Run by tests/fuzz/test_fuzz.py for a bounded time (longer with -m slow), and by scripts/sanitize
under AddressSanitizer and UndefinedBehaviorSanitizer.
"""

from __future__ import annotations

import struct
import sys

import atheris

with atheris.instrument_imports(include=["adiskq._sansio.codec", "adiskq.kafka.wire.stored_batch"]):
    from adiskq._sansio import codec as reference
    from adiskq._sansio.compression import COMPRESSED, Dictionaries, ReferencePlain
    from adiskq.kafka.wire.stored_batch import batch_from_stored_reference

from adiskq._sansio import core
from adiskq._sansio.native import NATIVE
from adiskq._sansio.values import Headers
from adiskq.kafka.wire.mapping import NULLS_HEADER

_LIMITS = (reference.DEFAULT_MAX_RECORD_BYTES, 24, 64, 512)
# The seeded records' headers: none, the gateway's nulls header, and Kafka's null values and
# repeated names (which the compiled decoders leave to the reference).
_SEED_HEADERS = (None, {NULLS_HEADER: b"key"}, Headers([("n", None), ("n", b"x")]), {NULLS_HEADER: b"key"})


_PLAIN = ReferencePlain(3)


def _no_dictionary(version: int) -> bytes:
    raise reference.CorruptRecordError(f"no zstd dictionary version {version} in this stream", position=0)


# One per input would cost a ReferencePlain each; the dictionaries hold no state a decode changes
# beyond the plain decompressor they make on first need.
_DICTIONARIES = Dictionaries(_no_dictionary)


def _outcome(call):  # type: ignore[no-untyped-def]
    try:
        result = call()
    except reference.CorruptRecordError as error:
        return ("CorruptRecordError", str(error), error.position)
    if isinstance(result, reference.ScannedRecords):
        error = None if result.error is None else (str(result.error), result.error.position)
        return (result.positions, result.sizes, result.timestamps, result.end, error)
    return result


def _seeded(data: bytes) -> bytes:
    """Half the inputs start as valid records (then the fuzzer's bytes follow), so damage near valid
    data is reached as often as random noise."""
    if not data or data[0] & 1 == 0:
        return data
    plain = data[0] & 2  # values in plain zstd frames (the value repeated: zstd shrinks it)
    records = b"".join(
        reference.encode_record(
            _PLAIN.compress(data[i : i + 7] * 8) if plain else data[i : i + 7],
            data[i : i + 3],
            i,
            _SEED_HEADERS[i // 7 % len(_SEED_HEADERS)],
            (COMPRESSED if plain else 0) | (reference.KEYLESS if data[0] & 8 else 0),
            None,
            _seed_transaction(data, i),
        )
        for i in range(0, min(len(data), 40), 7)
    )
    return records + data[1:]


def _seed_transaction(data: bytes, i: int) -> reference.TransactionFields | None:
    """Some seeded records are a Kafka transaction's, or its markers (codec.py's bits 2 and 3),
    which the compiled core checks and skips and leaves to the reference to decode."""
    if not data[0] & 4:
        return None
    kind = i // 7 % 3
    if kind == 0:
        return None
    return reference.TransactionFields(i, 1, None if kind == 1 else bool(i & 8), 2)


def test_one_input(raw: bytes) -> None:
    if len(raw) < 3:
        return
    what, count, limit_choice = raw[0] % 4, raw[1] % 8, raw[2] % len(_LIMITS)
    data = _seeded(raw[3:])
    limit = _LIMITS[limit_choice]
    dictionaries = _DICTIONARIES if raw[2] & 0x10 else None  # a compressed stream's reader, or not
    if what == 0:
        got = _outcome(
            lambda: core.decode_messages(data, 1, 10, count, max_record_bytes=limit, dictionaries=dictionaries)
        )
        want = _outcome(
            lambda: reference.decode_messages(data, 1, 10, count, max_record_bytes=limit, dictionaries=dictionaries)
        )
    elif what == 1:
        start = struct.unpack_from("<B", raw, 1)[0] % (len(data) + 1)
        got = _outcome(lambda: core.scan_columns(data, start, max_record_bytes=limit))
        want = _outcome(lambda: reference.scan_columns(data, start, max_record_bytes=limit))
    elif what == 2:
        start = raw[1] % (len(data) + 1)
        got = core.next_valid_record(data, start, max_record_bytes=limit)
        want = reference.next_valid_record(data, start, max_record_bytes=limit)
    else:
        if raw[1] & 0x80 and len(raw) > 3 and raw[3] & 1:  # seeded: sometimes the valid records alone
            data = data[: len(data) - (len(raw) - 4)]
        records = max(1, count)
        compiled = None if dictionaries is None else dictionaries.compiled
        got = NATIVE.kafka_batch_from_stored(data, 10, records, limit, compiled, NULLS_HEADER, 0)
        want = batch_from_stored_reference(
            data, 10, records, max_record_bytes=limit, dictionaries=dictionaries, nulls_header=NULLS_HEADER
        )
    if got != want:
        raise AssertionError(f"compiled {got!r} != reference {want!r} for {raw!r}")


def main() -> None:
    if not core.COMPILED:
        raise SystemExit("the compiled core is not in use (built? ADISKQ_NO_EXTENSIONS set?): nothing to fuzz")
    atheris.Setup(sys.argv, test_one_input)
    atheris.Fuzz()


if __name__ == "__main__":
    main()
