"""The codec's per-record functions from the compiled core, or from the pure-Python reference.

``adiskq._compiled`` (C, sources and format notes in ``adiskq/_csrc``) does the per-record work:
CRC-32C with the CPU's instruction, FNV-1 placement, encoding, decoding and scanning. The
pure-Python codec (``codec.py``) stays as the reference: ``ADISKQ_NO_EXTENSIONS=1`` selects it, and
the differential tests hold the two to the same bytes, messages, errors and error positions.

Each compiled function takes the plain cases and answers ``NotImplemented`` (or where it stopped)
for anything else; the wrappers here then run the reference, which encodes the unusual input or
raises its own error. So every error a user sees is the reference's, word for word.

Why C through the CPython API rather than Cython: the functions are few and small, the hot loops
build tuples and bytes objects directly (no generated glue between them), and the build needs
nothing but setuptools and the compiler every Python install already expects.
"""

from __future__ import annotations

import array
import itertools
import random
import zlib
from collections.abc import Callable, Iterator, Mapping, Sequence
from types import ModuleType
from typing import Final, TypeAlias

from .._errors import CorruptRecordError
from . import codec as reference
from . import tags as reference_tags
from .codec import DEFAULT_MAX_RECORD_BYTES, NEED_MORE, RecordExtent, ScannedRecords
from .compression import COMPRESSED, Dictionaries, frame_dictionary_id
from .entries import EncodedRun
from .naming import fnv1_32 as reference_fnv1_32
from .native import DISABLED, NATIVE
from .values import EMPTY_HEADERS, Message, Receipt, Record, ns_from_datetime

__all__ = [
    "COMPILED",
    "CORE_DESCRIPTION",
    "CRC32C_IMPLEMENTATION",
    "Buffer",
    "crc32c",
    "decode_at",
    "decode_messages",
    "encode_batch",
    "encode_record",
    "encode_records",
    "fnv1_32",
    "index_entries",
    "matching_entries",
    "matching_records",
    "next_valid_record",
    "pack_records",
    "place",
    "receipt",
    "receipts",
    "scan_columns",
    "scan_records",
    "tag_column",
]


def _configured() -> ModuleType | None:
    if NATIVE is not None:
        NATIVE.configure(Message, EMPTY_HEADERS, Record, Receipt, random.getrandbits(64))
    return NATIVE


_core: Final = _configured()
COMPILED: Final = _core is not None
# The compiled place() and encode_record() themselves, for the single push's hot path (no wrapper
# frame between): they answer NotImplemented where the wrappers below run the reference.
raw_place: Final = _core.place if _core is not None else None
raw_encode_record: Final = _core.encode_record if _core is not None else None
# One push's placement and encoding in one call (reference_encode_push is its reference form).
raw_encode_push: Final = _core.encode_push if _core is not None else None
# The sealed key index's sort (log/keyindex.c), for keyindex.py, whose reference form it answers
# NotImplemented to: None without the compiled core.
raw_sorted_key_values: Final = _core.sorted_key_values if _core is not None else None
# ``async for``'s buffer in C (adiskq/_csrc/log/buffered.c), or None: adiskq/_async/buffered.py has its Python form.
Buffer: Final[type | None] = _core.Buffer if _core is not None else None
CRC32C_IMPLEMENTATION: Final[str] = _core.crc32c_implementation if _core is not None else "crc32c package"
# What ``adiskq --version`` says of the core that runs.
_NOT_BUILT: Final = ", selected by ADISKQ_NO_EXTENSIONS=1" if DISABLED else ", the compiled one is not built"
CORE_DESCRIPTION: Final = (
    f"compiled core, CRC-32C by {CRC32C_IMPLEMENTATION}" if COMPILED else "pure-Python core" + _NOT_BUILT
)


# -- the reference forms of the functions only the producer's fast path has ------------------------


def reference_place(key: str | bytes, partition_count: int) -> tuple[bytes, int, int]:
    """One key's bytes, partition and key index hash."""
    raw = reference.utf8(key, "key") if isinstance(key, str) else bytes(key)
    return raw, reference_fnv1_32(raw) % partition_count, zlib.crc32(raw)


def reference_encode_push(
    value: bytes,
    key: str | bytes | None,
    timestamp_ns: int,
    headers: Mapping[str, bytes] | None,
    tag: str | None,
    partition_count: int,
    max_message_bytes: int,
    keyless: int = reference.KEYLESS,
) -> tuple[bytes, int, int] | None:
    """One push's record, partition and key index hash (``place`` and ``encode_record`` in one);
    None when the record would be over ``max_message_bytes``. A push given no key (None) gets 8
    random bytes, and its record the attributes ``keyless``: ``KEYLESS``, or 0 on a stream before
    format 5."""
    if key is None:
        raw = random.randbytes(8)
        partition, key_hash = reference_fnv1_32(raw) % partition_count, zlib.crc32(raw)
    else:
        raw, partition, key_hash = reference_place(key, partition_count)
    record = reference.encode_record(value, raw, timestamp_ns, headers, 0 if key is not None else keyless, tag)
    return None if len(record) > max_message_bytes else (record, partition, key_hash)


def reference_index_entries(
    first_offset: int, start: int, records: Sequence[bytes], timestamps: Sequence[int]
) -> tuple[bytes, bytes, int]:
    """A batch's ``.index`` entries (offset | position | size) and ``.timeindex`` entries (offset |
    timestamp_ns), u64/i64 little-endian, and where its data ends."""
    index = bytearray()
    timeindex = bytearray()
    position = start
    for offset, (record, timestamp_ns) in enumerate(zip(records, timestamps, strict=True), first_offset):
        index += offset.to_bytes(8, "little") + position.to_bytes(8, "little") + len(record).to_bytes(8, "little")
        timeindex += offset.to_bytes(8, "little") + timestamp_ns.to_bytes(8, "little", signed=True)
        position += len(record)
    return bytes(index), bytes(timeindex), position


def reference_decode_at(
    buf: bytes,
    partition: int,
    offsets: list[int],
    *,
    max_record_bytes: int = DEFAULT_MAX_RECORD_BYTES,
    dictionaries: Dictionaries | None = None,
) -> list[Message]:
    """``decode_messages`` of records whose offsets need not follow each other: the i-th gets ``offsets[i]``."""
    decoded = reference.decode_messages(
        buf, partition, 0, len(offsets), max_record_bytes=max_record_bytes, dictionaries=dictionaries
    )
    moved = [message._replace(offset=offset) for message, offset in zip(decoded, offsets, strict=True)]
    if type(decoded) is reference.TransactionalBatch:  # a Kafka transaction's records among them: say which
        batch = reference.TransactionalBatch(moved)
        batch.transactions = decoded.transactions
        return batch
    return moved


def _reference_decode_messages(
    buf: bytes | memoryview,
    partition: int,
    first_offset: int,
    count: int,
    *,
    max_record_bytes: int = DEFAULT_MAX_RECORD_BYTES,
    dictionaries: Dictionaries | None = None,
) -> list[Message]:
    """The reference's ``decode_messages``, which takes bytes: a view of a mapped segment is copied,
    as ``pread`` would have."""
    data = buf if type(buf) is bytes else bytes(buf)
    return reference.decode_messages(
        data, partition, first_offset, count, max_record_bytes=max_record_bytes, dictionaries=dictionaries
    )


def _compiled_gains(buf: bytes, position: int, max_record_bytes: int, dictionaries: Dictionaries) -> bool:
    """Whether the record at ``position``, which the compiled decoder stopped at, is compressed with
    a dictionary it lacked that is now loaded (so decoding again goes on). Not for damage, which the
    reference's decoding then names as it does (a missing or damaged dictionary file raises here)."""
    try:
        record = reference.decode_record(buf, position, max_record_bytes=max_record_bytes)
    except CorruptRecordError:
        return False
    if record is NEED_MORE or not record.attributes & COMPRESSED:
        return False
    dictionary_id = frame_dictionary_id(record.value)
    # 0: plain zstd, which the compiled decoder reads without a dictionary (it stopped for damage,
    # or because libzstd cannot be loaded: the reference reads or names it).
    if dictionary_id is None or dictionary_id == 0 or dictionary_id in dictionaries.compiled:
        return False
    dictionaries.need(dictionary_id, position)
    return dictionary_id in dictionaries.compiled


def _stopped_at_compressed(buf: bytes, position: int, max_record_bytes: int) -> bool:
    """Whether the record the compiled decoder stopped at is whole, sound and compressed: one it
    cannot read without the stream's dictionaries, which the reference names (its damage, if any,
    is named by ``raise_record_error`` instead)."""
    try:
        record = reference.decode_record(buf, position, max_record_bytes=max_record_bytes)
    except CorruptRecordError:
        return False
    return record is not NEED_MORE and bool(record.attributes & COMPRESSED)


def reference_receipts(partition: int, first_offset: int, count: int) -> list[Receipt]:
    """The receipts of ``count`` messages stored from ``first_offset`` on in one partition."""
    offsets = range(first_offset, first_offset + count)
    return list(map(_new_tuple, itertools.repeat(Receipt), zip(itertools.repeat(partition), offsets)))


def reference_receipt(partition: int, offset: int) -> Receipt:
    """A single push's receipt: ``Receipt(partition, offset)``, each an int (``TypeError`` otherwise)."""
    if type(partition) is not int or type(offset) is not int:
        raise TypeError("receipt(partition: int, offset: int)")
    receipt: Receipt = _new_tuple(Receipt, (partition, offset))
    return receipt


_new_tuple = tuple.__new__


def reference_pack_records(
    items: Sequence[Record | bytes], now: int, max_total: int, keyless: int = reference.KEYLESS
) -> EncodedRun | None:
    """Records (adiskq.Record, or bytes: a value alone; ``now`` where they have no timestamp, 8 random
    bytes where they have no key, with the attributes ``keyless``) encoded as ``encode_record`` does,
    into one buffer, with their entries (no tag column, ``b""``, when no record carries a tag); None
    when they take more than ``max_total`` bytes in all."""
    encoded: list[bytes] = []
    stamps: list[int] = []
    hashes: list[int] = []
    for item in items:
        record = Record(item) if type(item) is bytes else item
        assert isinstance(record, Record)
        key = record.key
        raw = random.randbytes(8) if key is None else reference.utf8(key, "key") if isinstance(key, str) else key
        timestamp = record.timestamp
        stamp = now if timestamp is None else timestamp if isinstance(timestamp, int) else ns_from_datetime(timestamp)
        attributes = keyless if key is None else 0
        encoded.append(reference.encode_record(record.value, raw, stamp, record.headers, attributes, record.tag))
        stamps.append(stamp)
        hashes.append(zlib.crc32(raw))
    if sum(map(len, encoded)) > max_total:
        return None
    index, timeindex, _ = reference_index_entries(0, 0, encoded, stamps)
    key_hashes = b"".join(key_hash.to_bytes(4, "little") for key_hash in hashes)
    largest = max(map(len, encoded), default=0)
    tags = reference_tags.tag_column(encoded)
    return EncodedRun(
        b"".join(encoded), index, timeindex, key_hashes, tags if reference_tags.names_a_tag(tags) else b"", largest
    )


EncodedRecords: TypeAlias = "tuple[list[bytes], list[int], list[int], array.array[int], int, int]"


# -- the compiled forms, each falling back to the reference for what it does not take -------------

if _core is not None:
    _encode_record = _core.encode_record
    _encode_batch = _core.encode_batch
    _place = _core.place
    _encode_records = _core.encode_records
    _pack_records = _core.pack_records
    receipts = _core.receipts
    receipt: Callable[[int, int], Receipt] = _core.receipt
    _index_entries = _core.index_entries
    _decode_messages = _core.decode_messages
    _scan_columns = _core.scan_columns
    crc32c = _core.crc32c
    fnv1_32 = _core.fnv1_32
    next_valid_record_at = _core.next_valid_record
    _tag_column = _core.tag_column
    _decode_at = _core.decode_at
    _matching_entries = _core.matching_entries
    _matching_records = _core.matching_records

    def encode_record(
        value: bytes,
        key: bytes,
        timestamp_ns: int,
        headers: Mapping[str, bytes] | None = None,
        attributes: int = 0,
        tag: str | None = None,
        transaction: reference.TransactionFields | None = None,
    ) -> bytes:
        if transaction is not None:  # a transactional record or marker: the reference's alone
            return reference.encode_record(value, key, timestamp_ns, headers, attributes, tag, transaction)
        record = _encode_record(value, key, timestamp_ns, headers or None, attributes, tag)
        if record is NotImplemented:
            return reference.encode_record(value, key, timestamp_ns, headers, attributes, tag)
        return record  # type: ignore[no-any-return]

    def encode_batch(
        values: Sequence[bytes],
        keys: Sequence[bytes],
        timestamps: Sequence[int],
        headers: Sequence[Mapping[str, bytes] | None] | None = None,
        tags: Sequence[str | None] | None = None,
    ) -> list[bytes]:
        records = _encode_batch(values, keys, timestamps, headers, tags)
        if records is NotImplemented:
            return reference.encode_batch(values, keys, timestamps, headers, tags)
        return records  # type: ignore[no-any-return]

    def tag_column(records: Sequence[bytes]) -> bytes:
        """The ``.tagindex`` entries of encoded records (``tags.tag_column``)."""
        column = _tag_column(records)
        if column is NotImplemented:
            return reference_tags.tag_column(records)
        return column  # type: ignore[no-any-return]

    def matching_entries(column: bytes, hashes: tuple[int, ...]) -> list[int]:
        """Entry numbers of a ``.tagindex`` buffer whose hash is one of ``hashes`` (``tags.matching_entries``)."""
        found = _matching_entries(column, hashes)
        if found is NotImplemented:
            return reference_tags.matching_entries(column, hashes)
        return found  # type: ignore[no-any-return]

    def matching_records(
        column: bytes,
        entries: bytes | memoryview,
        hashes: tuple[int, ...],
        first_offset: int,
        max_count: int,
        max_bytes: int,
    ) -> reference_tags.MatchingRecords | int:
        """A filtered read's records to fetch, and their spans (``tags.matching_records``)."""
        found = _matching_records(column, entries, hashes, first_offset, max_count, max_bytes)
        if found is NotImplemented:
            return reference_tags.matching_records(column, entries, hashes, first_offset, max_count, max_bytes)
        if type(found) is int:
            return found
        return reference_tags.MatchingRecords._make(found)

    def encode_records(
        items: list[Record | bytes],
        now: int,
        partition_count: int,
        prepared: object = None,
        keyless: int = reference.KEYLESS,
    ) -> EncodedRecords | None:
        """push_many's records (adiskq.Record or bytes) encoded, with their timestamps (``now`` where
        they have none), partitions, key hashes and the largest record's size; None where the batch
        holds something only the producer's Python path takes (a datetime, a bytearray...). With
        ``prepared`` (a dictionary the compiled core prepared) values are stored compressed. The
        last two items: the largest record's size (its value counted uncompressed) and the records'
        size in all, as stored. The key hashes come as an ``array("I")``: the key index's column as
        it is written (the compiled core packs them; no int is made per record)."""
        encoded = _encode_records(items, now, partition_count, prepared, keyless)
        if encoded is NotImplemented:
            return None
        records, stamps, partitions, packed_hashes, largest, total = encoded
        return records, stamps, partitions, array.array("I", packed_hashes), largest, total

    def pack_records(
        items: list[Record | bytes], now: int, max_total: int, keyless: int = reference.KEYLESS
    ) -> EncodedRun | None:
        """push_many's batch for a one-partition stream that stores values as they are, packed in one
        call (``reference_pack_records``); None when it is over ``max_total`` bytes or holds something
        only the producer's other paths take (a datetime, a bytearray...), which then encode it."""
        packed = _pack_records(items, now, max_total, keyless)
        if packed is None or packed is NotImplemented:
            return None
        return EncodedRun._make(packed)

    def place(key: str | bytes, partition_count: int) -> tuple[bytes, int, int]:
        placed = _place(key, partition_count)
        if placed is NotImplemented:
            return reference_place(key, partition_count)
        return placed  # type: ignore[no-any-return]

    def index_entries(
        first_offset: int, start: int, records: Sequence[bytes], timestamps: Sequence[int]
    ) -> tuple[bytes, bytes, int]:
        entries = _index_entries(first_offset, start, records, timestamps)
        if entries is NotImplemented:
            return reference_index_entries(first_offset, start, records, timestamps)
        return entries  # type: ignore[no-any-return]

    def decode_messages(
        buf: bytes | memoryview,
        partition: int,
        first_offset: int,
        count: int,
        *,
        max_record_bytes: int = DEFAULT_MAX_RECORD_BYTES,
        dictionaries: Dictionaries | None = None,
    ) -> list[Message]:
        # bytes, or a view of a sealed segment's mapping (SegmentReader.read_span), which the
        # reference gets as bytes: a copy only on the way to an error.
        if type(buf) is not bytes and type(buf) is not memoryview:
            return _reference_decode_messages(
                buf, partition, first_offset, count, max_record_bytes=max_record_bytes, dictionaries=dictionaries
            )
        compiled = None if dictionaries is None else dictionaries.compiled
        decoded = _decode_messages(buf, partition, first_offset, count, max_record_bytes, compiled)
        if type(decoded) is list:
            return decoded
        if decoded is NotImplemented:  # a view that is not one contiguous run of bytes, Kafka's headers
            return _reference_decode_messages(
                buf, partition, first_offset, count, max_record_bytes=max_record_bytes, dictionaries=dictionaries
            )
        buf = bytes(buf)
        position, all_decoded = decoded
        if all_decoded:
            raise CorruptRecordError("records and index entries disagree about the data's length", position=position)
        if dictionaries is not None:
            if _compiled_gains(buf, position, max_record_bytes, dictionaries):
                return decode_messages(
                    buf, partition, first_offset, count, max_record_bytes=max_record_bytes, dictionaries=dictionaries
                )
            # A value that will not decompress (the reference names why), or a dictionary libzstd
            # could not take: the reference decodes it with the zstd binding.
            return _reference_decode_messages(
                buf, partition, first_offset, count, max_record_bytes=max_record_bytes, dictionaries=dictionaries
            )
        if _stopped_at_compressed(buf, position, max_record_bytes):  # and this reader has no dictionaries
            return _reference_decode_messages(
                buf, partition, first_offset, count, max_record_bytes=max_record_bytes, dictionaries=None
            )
        reference.raise_record_error(buf, position, max_record_bytes)
        raise AssertionError("unreachable")  # pragma: no cover - raise_record_error always raises

    def decode_at(
        buf: bytes,
        partition: int,
        offsets: list[int],
        *,
        max_record_bytes: int = DEFAULT_MAX_RECORD_BYTES,
        dictionaries: Dictionaries | None = None,
    ) -> list[Message]:
        compiled = None if dictionaries is None else dictionaries.compiled
        decoded = _decode_at(buf, partition, offsets, max_record_bytes, compiled)
        if type(decoded) is list:
            return decoded
        if decoded is NotImplemented:  # a record with Kafka's headers (a null value, a repeated name)
            return reference_decode_at(
                buf, partition, offsets, max_record_bytes=max_record_bytes, dictionaries=dictionaries
            )
        position, all_decoded = decoded
        if all_decoded:
            raise CorruptRecordError("records and index entries disagree about the data's length", position=position)
        if dictionaries is not None:
            if _compiled_gains(buf, position, max_record_bytes, dictionaries):
                return decode_at(buf, partition, offsets, max_record_bytes=max_record_bytes, dictionaries=dictionaries)
            return reference_decode_at(
                buf, partition, offsets, max_record_bytes=max_record_bytes, dictionaries=dictionaries
            )
        if _stopped_at_compressed(buf, position, max_record_bytes):  # and this reader has no dictionaries
            return reference_decode_at(buf, partition, offsets, max_record_bytes=max_record_bytes, dictionaries=None)
        reference.raise_record_error(buf, position, max_record_bytes)
        raise AssertionError("unreachable")  # pragma: no cover - raise_record_error always raises

    def scan_columns(buf: bytes, pos: int = 0, *, max_record_bytes: int = DEFAULT_MAX_RECORD_BYTES) -> ScannedRecords:
        positions, sizes, timestamps, stop = _scan_columns(buf, pos, max_record_bytes)
        error: CorruptRecordError | None = None
        if stop < len(buf):
            try:
                decoded = reference.decode_record(buf, stop, max_record_bytes=max_record_bytes)
            except CorruptRecordError as bad:
                error = bad
            else:
                if decoded is not NEED_MORE:  # pragma: no cover - the two disagree: trust the reference
                    raise AssertionError(f"the compiled scan stopped at a valid record (byte {stop})")
        valid_end = positions[-1] + sizes[-1] if positions else pos
        return ScannedRecords(positions, sizes, timestamps, valid_end, error)

    def next_valid_record(buf: bytes, start: int, *, max_record_bytes: int = DEFAULT_MAX_RECORD_BYTES) -> int | None:
        found: int | None = next_valid_record_at(buf, start, max_record_bytes)
        return found

else:
    encode_record = reference.encode_record
    encode_batch = reference.encode_batch

    def encode_records(
        items: list[Record | bytes],
        now: int,
        partition_count: int,
        prepared: object = None,
        keyless: int = reference.KEYLESS,
    ) -> EncodedRecords | None:
        return None  # the producer's Python path encodes every batch

    def decode_at(
        buf: bytes,
        partition: int,
        offsets: list[int],
        *,
        max_record_bytes: int = DEFAULT_MAX_RECORD_BYTES,
        dictionaries: Dictionaries | None = None,
    ) -> list[Message]:
        return reference_decode_at(
            buf, partition, offsets, max_record_bytes=max_record_bytes, dictionaries=dictionaries
        )

    def pack_records(
        items: list[Record | bytes], now: int, max_total: int, keyless: int = reference.KEYLESS
    ) -> EncodedRun | None:
        return None  # the producer's Python path encodes every batch

    receipts = reference_receipts
    receipt = reference_receipt
    place = reference_place
    index_entries = reference_index_entries
    decode_messages = _reference_decode_messages
    scan_columns = reference.scan_columns
    next_valid_record = reference.next_valid_record
    crc32c = reference.crc32c
    fnv1_32 = reference_fnv1_32
    tag_column = reference_tags.tag_column
    matching_entries = reference_tags.matching_entries
    matching_records = reference_tags.matching_records


def scan_records(
    buf: bytes | bytearray | memoryview, pos: int = 0, *, max_record_bytes: int = DEFAULT_MAX_RECORD_BYTES
) -> Iterator[RecordExtent]:
    """``codec.scan_records`` over this core's ``scan_columns``."""
    return reference.scan_records(buf, pos, max_record_bytes=max_record_bytes, scan=scan_columns)
