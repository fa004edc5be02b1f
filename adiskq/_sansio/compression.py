"""Values compressed with a stream's zstd dictionary: the record's side and the dictionary file's, no I/O.

A compressed record (format ``adiskq/3``) sets attributes bit 1 (``COMPRESSED``) and stores as its
value one zstd frame (RFC 8878) made with one of the stream's dictionaries, without the frame's
4-byte magic number (zstd's "magicless" frame: the record's attribute already says what the bytes
are; put the magic ``28 B5 2F FD`` back in front and any zstd reads it). Everything else in the
record (key, tag, headers, timestamp, CRC-32C over the stored bytes) is as ``codec.py`` says. The
frame says which dictionary it needs: its header carries the dictionary's id, and a stream's
dictionary of version ``n`` has id ``DICTIONARY_ID_BASE + n`` (32768 on, the range zstd leaves to
users; 2 bytes in the frame header). The frame must also state its content size (at most the
reader's record limit), hold that many bytes exactly, and be the whole value (its last block, and
its checksum when it has one, end where the value ends): anything else is a damaged record, never a
shorter or longer value. For a value of 263 bytes the frame's own bytes are 8: the descriptor
(1), the dictionary id (2), the content size (2) and one block header (3).

A frame that names no dictionary (no dictionary id, or id 0) is plain zstd: a producer writes such
frames while the stream has no dictionary yet (its first values, which train the first one), and
only for a value the frame is smaller than; a value plain zstd does not shrink is stored as it is
(attributes bit 1 clear). Its other rules are the same: content size stated, one whole frame.

A dictionary file, ``dictionaries/zstd-NNNNNNNN.dict`` in the stream's folder (NNNNNNNN its version,
decimal, from 1), all integers little-endian::

    8 bytes  magic         b"ADQZDICT"
    u32      version       the version in the file's name
    u32      length        bytes of the dictionary that follow
    u32      crc           CRC-32C of those bytes
    ...      dictionary    a zstd dictionary (magic 0xEC30A437) whose id is DICTIONARY_ID_BASE + version

A file is written whole and fsynced (then its folder) before any record names it, and never
removed: retention and vacuum delete segments only, so every record keeps the dictionary it needs.
A reader that meets a file whose CRC, magic, version or id is wrong refuses the records that need
it (``CorruptStreamError`` naming the file), and one whose file is missing says so: neither ever
yields bytes decompressed with the wrong dictionary (zstd itself refuses a frame whose dictionary id
is not its dictionary's).

The reference decompresses through the ``zstandard`` binding (the ``zstd`` extra); the compiled core
calls libzstd directly (``adiskq/_csrc/log/compression.c``), and both take and give the same bytes.
"""

from __future__ import annotations

import struct
from collections.abc import Callable
from typing import Final, NamedTuple

from .._errors import CorruptRecordError, CorruptStreamError, InvalidArgumentError
from .._extras import needs_extra
from .native import NATIVE

__all__ = [
    "COMPRESSED",
    "DICTIONARY_FILE_HEADER",
    "DICTIONARY_ID_BASE",
    "ZSTD_DICTIONARY_MAGIC",
    "Dictionaries",
    "ReferenceDictionary",
    "ReferencePlain",
    "dictionary_file_name",
    "encode_dictionary_file",
    "frame_dictionary_id",
    "import_zstandard",
    "parse_dictionary_file",
    "read_frame",
    "with_dictionary_id",
]

COMPRESSED: Final = 0x02  # attributes bit 1: the value is a zstd frame made with a stream dictionary
DICTIONARY_ID_BASE: Final = 32768  # a stream's dictionary of version n has zstd id DICTIONARY_ID_BASE + n
MAX_DICTIONARY_VERSION: Final = 32767  # ids up to 65535: two bytes in every frame header
ZSTD_DICTIONARY_MAGIC: Final = 0xEC30A437
# zstd's level for values: 3 (its default) compresses ~250-byte JSON a tenth smaller than 1 does, for
# little more time with a prepared dictionary.
DEFAULT_LEVEL: Final = 3
_FRAME_MAGIC: Final = b"\x28\xb5\x2f\xfd"  # 0xFD2FB528: written by zstd, not stored in a record
_FILE_MAGIC: Final = b"ADQZDICT"
DICTIONARY_FILE_HEADER: Final = struct.Struct("<8sIII")  # magic, version, length, crc
_U32 = struct.Struct("<I")
_DICT_ID_BYTES: Final = (0, 1, 2, 4)  # by the Dictionary_ID_flag
_BLOCK_HEADER: Final = 3


def import_zstandard() -> object:
    """The ``zstandard`` module, or an error saying which extra to install."""
    with needs_extra("zstd", "a compressed stream without the compiled core, or training its dictionary,"):
        import zstandard
    return zstandard


def dictionary_file_name(version: int) -> str:
    """The file name of a dictionary version in the stream's ``dictionaries/`` folder."""
    return f"zstd-{version:08d}.dict"


def with_dictionary_id(dictionary: bytes, version: int) -> bytes:
    """A zstd dictionary given the id of ``version`` (the id field is bytes 4..8 of its header):
    InvalidArgumentError for bytes that are not a zstd dictionary."""
    if len(dictionary) < 8 or _U32.unpack_from(dictionary, 0)[0] != ZSTD_DICTIONARY_MAGIC:
        raise InvalidArgumentError(
            "a zstd dictionary starts with the magic number 0xEC30A437: give one made by `zstd --train` or "
            "zstandard.train_dictionary (raw content has no id for records to name it by)"
        )
    if not 1 <= version <= MAX_DICTIONARY_VERSION:
        raise InvalidArgumentError(f"a stream holds at most {MAX_DICTIONARY_VERSION} dictionary versions")
    return dictionary[:4] + _U32.pack(DICTIONARY_ID_BASE + version) + dictionary[8:]


def encode_dictionary_file(version: int, dictionary: bytes, crc32c: object) -> bytes:
    """The bytes of a dictionary file (``crc32c`` is the codec's CRC-32C function)."""
    crc: int = crc32c(dictionary)  # type: ignore[operator]
    return DICTIONARY_FILE_HEADER.pack(_FILE_MAGIC, version, len(dictionary), crc) + dictionary


def parse_dictionary_file(data: bytes, version: int, path: str, crc32c: object) -> bytes:
    """The zstd dictionary a dictionary file holds, every field checked; CorruptStreamError names
    the file and what is wrong, and says the records needing it cannot be read."""

    def damaged(what: str) -> CorruptStreamError:
        return CorruptStreamError(
            f"zstd dictionary file {path} is damaged ({what}): the records compressed with dictionary version "
            f"{version} cannot be read until it is restored from a backup"
        )

    if len(data) < DICTIONARY_FILE_HEADER.size:
        raise damaged(f"{len(data)} bytes, shorter than its header")
    magic, stored_version, length, crc = DICTIONARY_FILE_HEADER.unpack_from(data, 0)
    if magic != _FILE_MAGIC:
        raise damaged(f"magic {magic!r}, not {_FILE_MAGIC!r}")
    if stored_version != version:
        raise damaged(f"it says version {stored_version}")
    dictionary = data[DICTIONARY_FILE_HEADER.size :]
    if len(dictionary) != length:
        raise damaged(f"{len(dictionary)} bytes of dictionary, its header says {length}")
    if crc32c(dictionary) != crc:  # type: ignore[operator]
        raise damaged("CRC-32C mismatch")
    if length < 8 or _U32.unpack_from(dictionary, 4)[0] != DICTIONARY_ID_BASE + version:
        raise damaged(f"its dictionary does not carry id {DICTIONARY_ID_BASE + version}")
    return dictionary


class FrameHeader(NamedTuple):
    """What a stored frame's header says, and whether its blocks end where the value ends."""

    dictionary_id: int  # 0: it names none
    content_size: int | None  # None: not stated
    whole: bool  # its blocks (and checksum, when it has one) end exactly at the value's end


def read_frame(value: bytes | memoryview) -> FrameHeader | None:
    """The header of a stored (magicless) zstd frame and whether the frame is whole, or None when the
    bytes do not start with a frame header (too short, or its reserved bit set)."""
    if len(value) < 1 or value[0] & 0x08:
        return None
    descriptor = value[0]
    single_segment = (descriptor >> 5) & 1
    size_flag = descriptor >> 6
    size_bytes = single_segment if size_flag == 0 else 1 << size_flag
    at = 2 - single_segment  # the descriptor, then a window descriptor unless single segment
    id_bytes = _DICT_ID_BYTES[descriptor & 3]
    if len(value) < at + id_bytes + size_bytes:
        return None
    dictionary_id = int.from_bytes(value[at : at + id_bytes], "little")
    at += id_bytes
    content_size: int | None = None
    if size_bytes:
        content_size = int.from_bytes(value[at : at + size_bytes], "little") + (256 if size_bytes == 2 else 0)
    at += size_bytes
    whole = False
    while len(value) - at >= _BLOCK_HEADER:
        header = int.from_bytes(value[at : at + _BLOCK_HEADER], "little")
        at += _BLOCK_HEADER
        block_type = (header >> 1) & 3
        stored = 1 if block_type == 1 else header >> 3  # an RLE block stores one byte
        if block_type == 3 or len(value) - at < stored:
            break
        at += stored
        if header & 1:  # the last block
            if descriptor & 0x04:  # a content checksum follows
                at += 4
            whole = at == len(value)
            break
    return FrameHeader(dictionary_id, content_size, whole)


def frame_dictionary_id(value: bytes | memoryview) -> int | None:
    """The dictionary id a stored zstd frame's header names (0 for none), or None when the bytes do
    not start with a frame header."""
    header = read_frame(value)
    return None if header is None else header.dictionary_id


class ReferenceDictionary:
    """One dictionary version made ready for the ``zstandard`` binding: the reference's compressor
    and decompressor of values."""

    __slots__ = ("_compressor", "_decompressor", "dictionary", "dictionary_id", "version")

    def __init__(self, version: int, dictionary: bytes, level: int) -> None:
        import_zstandard()  # the error saying what to install, where the binding is missing
        import zstandard as zstd

        self.version = version
        self.dictionary = dictionary
        self.dictionary_id = DICTIONARY_ID_BASE + version
        data = zstd.ZstdCompressionDict(dictionary, dict_type=zstd.DICT_TYPE_FULLDICT)
        self._compressor = zstd.ZstdCompressor(
            level=level, dict_data=data, write_checksum=False, write_content_size=True, write_dict_id=True
        )
        self._decompressor = zstd.ZstdDecompressor(dict_data=data)

    def compress(self, value: bytes) -> bytes:
        """``value`` as one zstd frame with this dictionary, its content size stated, stored without
        its magic number."""
        frame: bytes = self._compressor.compress(value)
        if frame[:4] != _FRAME_MAGIC:  # pragma: no cover - zstd writes every frame with it
            raise ValueError("zstandard wrote a frame without zstd's magic number")
        return frame[4:]

    def decompress(self, frame: bytes, size: int, position: int) -> bytes:
        """The value a stored frame holds, whose header was checked to state ``size`` and whose blocks
        end where it ends; CorruptRecordError (at ``position``) unless it holds exactly ``size`` bytes."""
        return _decompressed(self._decompressor, frame, size, position)


def _decompressed(decompressor: object, frame: bytes, size: int, position: int) -> bytes:
    """What a ``zstandard`` decompressor makes of a stored frame stating ``size``: CorruptRecordError
    unless it is exactly ``size`` bytes."""
    import zstandard as zstd

    try:
        value: bytes = decompressor.decompress(  # type: ignore[attr-defined]
            _FRAME_MAGIC + frame, max_output_size=size, allow_extra_data=False
        )
    except zstd.ZstdError as error:
        raise CorruptRecordError(f"compressed value does not decompress ({error})", position=position) from None
    if len(value) != size:
        raise CorruptRecordError(
            f"compressed value holds {len(value)} bytes, its zstd frame says {size}", position=position
        )
    return value


class ReferencePlain:
    """Plain zstd (no dictionary) for the ``zstandard`` binding: the reference's compressor and
    decompressor of frames that name no dictionary."""

    __slots__ = ("_compressor", "_decompressor")

    def __init__(self, level: int) -> None:
        import_zstandard()
        import zstandard as zstd

        self._compressor = zstd.ZstdCompressor(level=level, write_checksum=False, write_content_size=True)
        self._decompressor = zstd.ZstdDecompressor()

    def compress(self, value: bytes) -> bytes:
        """``value`` as one plain zstd frame stating its content size, stored without its magic number."""
        frame: bytes = self._compressor.compress(value)
        if frame[:4] != _FRAME_MAGIC:  # pragma: no cover - zstd writes every frame with it
            raise ValueError("zstandard wrote a frame without zstd's magic number")
        return frame[4:]

    def decompress(self, frame: bytes, size: int, position: int) -> bytes:
        """The value a stored plain frame holds (``ReferenceDictionary.decompress``'s checks)."""
        return _decompressed(self._decompressor, frame, size, position)


class Dictionaries:
    """A stream's dictionaries as readers and producers use them: each version made ready once for
    both cores (``compiled``: libzstd's prepared dictionaries by id, for the compiled decoder;
    ``reference``: ``ReferenceDictionary`` by id), loaded on first need through ``load`` (the storage
    layer's reading of one version's file: the dictionary's bytes, or CorruptStreamError)."""

    __slots__ = ("_load", "_plain", "compiled", "level", "reference")

    def __init__(self, load: Callable[[int], bytes], *, level: int = DEFAULT_LEVEL) -> None:
        self._load = load
        self.level = level
        self.compiled: dict[int, object] = {}
        self.reference: dict[int, ReferenceDictionary] = {}
        self._plain: ReferencePlain | None = None

    def plain(self) -> ReferencePlain:
        """The reference's plain zstd (frames that name no dictionary), made on first need."""
        if self._plain is None:
            self._plain = ReferencePlain(self.level)
        return self._plain

    def add(self, version: int, dictionary: bytes) -> None:
        """Make version ``version`` ready (its bytes already checked to carry its id)."""
        dictionary_id = DICTIONARY_ID_BASE + version
        if NATIVE is not None and dictionary_id not in self.compiled:
            prepared = NATIVE.zstd_prepare(dictionary, self.level)
            if prepared is not None:  # None: libzstd.so.1 cannot be loaded, the reference decompresses
                self.compiled[dictionary_id] = prepared
        if dictionary_id not in self.reference and dictionary_id not in self.compiled:
            self.reference[dictionary_id] = ReferenceDictionary(version, dictionary, self.level)

    def need(self, dictionary_id: int, position: int) -> None:
        """Load the dictionary a frame names unless it is ready: CorruptRecordError when the id is not
        one a stream dictionary has, CorruptStreamError when its file is missing or damaged."""
        if dictionary_id in self.compiled or dictionary_id in self.reference:
            return
        version = dictionary_id - DICTIONARY_ID_BASE
        if not 1 <= version <= MAX_DICTIONARY_VERSION:
            raise CorruptRecordError(
                f"compressed value names zstd dictionary id {dictionary_id}, which no stream dictionary has",
                position=position,
            )
        self.add(version, self._load(version))

    def decompress(self, frame: bytes, limit: int, position: int) -> bytes:
        """The value a compressed record holds (the reference's way), every check made."""
        header = read_frame(frame)
        if header is None:
            raise CorruptRecordError("compressed value is not a zstd frame", position=position)
        dictionary_id = header.dictionary_id
        if dictionary_id != 0:  # 0: plain zstd, which needs no dictionary
            self.need(dictionary_id, position)
        size = header.content_size
        if size is None or size > limit:
            raise CorruptRecordError(
                "compressed value's zstd frame does not state a content size within the record limit",
                position=position,
            )
        if not header.whole:
            raise CorruptRecordError(
                "compressed value is not one whole zstd frame (its blocks end before or after the value)",
                position=position,
            )
        if dictionary_id == 0:
            return self.plain().decompress(frame, size, position)
        reference = self.reference.get(dictionary_id)
        if reference is None:  # ready for the compiled core only: make the reference's too
            reference = ReferenceDictionary(
                dictionary_id - DICTIONARY_ID_BASE, self._load(dictionary_id - DICTIONARY_ID_BASE), self.level
            )
            self.reference[dictionary_id] = reference
        return reference.decompress(frame, size, position)
