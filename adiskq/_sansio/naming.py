"""Names on disk (go-diskq's layout) and the placement of keys on partitions. No I/O here.

::

    STREAM/settings.json  owner  recovery.json
    STREAM/writers/ID     one file per open producer (its flock says it is alive)
    STREAM/locks/setup | vacuum | partition-000000    the shared producers' flocks
    STREAM/parts/000000/00000000000000000000.data | .index | .timeindex | .tagindex | .keyindex | .txnindex
    STREAM/groups/NAME/...
"""

from __future__ import annotations

import re
from typing import Final

from .._errors import InvalidArgumentError, InvalidNameError

__all__ = [
    "DATA",
    "GROUPS_DIR",
    "INDEX",
    "KEYINDEX",
    "LOCKS_DIR",
    "OWNER_FILE",
    "PARTS_DIR",
    "RECOVERY_FILE",
    "SEGMENT_EXTENSIONS",
    "SETTINGS_FILE",
    "TAGINDEX",
    "TIMEINDEX",
    "TXNINDEX",
    "WRITERS_DIR",
    "fnv1_32",
    "group_folder",
    "group_of_folder",
    "parse_partition_dir",
    "parse_segment_file",
    "partition_dir_name",
    "partition_for_key",
    "partition_lock_name",
    "segment_file_name",
    "validate_group_name",
]

SETTINGS_FILE: Final = "settings.json"
OWNER_FILE: Final = "owner"
RECOVERY_FILE: Final = "recovery.json"
WRITERS_DIR: Final = "writers"
LOCKS_DIR: Final = "locks"
PARTS_DIR: Final = "parts"
GROUPS_DIR: Final = "groups"

DATA: Final = "data"
INDEX: Final = "index"
TIMEINDEX: Final = "timeindex"
KEYINDEX: Final = "keyindex"
TAGINDEX: Final = "tagindex"
TXNINDEX: Final = "txnindex"  # the aborted Kafka transactions of a segment (``_storage/txn_index.py``)
SEGMENT_EXTENSIONS: Final = (DATA, INDEX, TIMEINDEX, TAGINDEX, KEYINDEX, TXNINDEX)

MAX_PARTITIONS: Final = 1_000_000  # six digits
_MAX_OFFSET: Final = 10**20 - 1  # twenty digits

# fullmatch and [0-9], not match and \d: "$" also matches before a trailing newline, and \d matches
# any Unicode digit (int() would even parse them), so either would let odd names pass as ours.
_SEGMENT_FILE = re.compile(r"([0-9]{20})\.(data|index|timeindex|tagindex|keyindex|txnindex)")
_PARTITION_DIR = re.compile(r"[0-9]{6}")
_GROUP_NAME = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.\-]{0,199}")


def partition_dir_name(partition: int) -> str:
    """``000003`` for partition 3."""
    if not 0 <= partition < MAX_PARTITIONS:
        raise InvalidArgumentError(f"partition {partition} is outside 0..{MAX_PARTITIONS - 1}")
    return f"{partition:06d}"


def partition_lock_name(partition: int) -> str:
    """``partition-000003``: the file under ``locks/`` shared producers flock to append to partition 3."""
    return f"partition-{partition_dir_name(partition)}"


def parse_partition_dir(name: str) -> int | None:
    """The partition a folder name stands for, or None for anything else."""
    return int(name) if _PARTITION_DIR.fullmatch(name) else None


def segment_file_name(base_offset: int, extension: str) -> str:
    """``00000000000000004711.index`` for the segment starting at offset 4711."""
    if not 0 <= base_offset <= _MAX_OFFSET:
        raise InvalidArgumentError(f"offset {base_offset} does not fit in twenty digits")
    return f"{base_offset:020d}.{extension}"


def parse_segment_file(name: str) -> tuple[int, str] | None:
    """``(base_offset, extension)`` of a segment file name, or None for a stray file."""
    match = _SEGMENT_FILE.fullmatch(name)
    if match is None:
        return None
    return int(match.group(1)), match.group(2)


_FNV32_OFFSET_BASIS: Final = 0x811C9DC5
_FNV32_PRIME: Final = 0x01000193


def fnv1_32(data: bytes) -> int:
    """FNV-1 (not 1a) 32-bit hash: multiply, then xor, per byte — Go's ``hash/fnv.New32``."""
    value = _FNV32_OFFSET_BASIS
    for byte in data:
        value = ((value * _FNV32_PRIME) & 0xFFFF_FFFF) ^ byte
    return value


def partition_for_key(key: bytes, partition_count: int) -> int:
    """The partition of a key: FNV-1 32-bit of its bytes modulo the count, as go-diskq places it."""
    return fnv1_32(key) % partition_count


# A group folder's name holds at most this many bytes (the longest file name of Linux file systems).
_MAX_FOLDER_BYTES: Final = 255
_ENCODED_PREFIX: Final = "%"  # never the first character of a plain group name
_UNESCAPED: Final = frozenset(b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_.-")


def group_folder(name: str) -> str:
    """The folder under ``groups/`` that holds the group ``name``: the name itself when it is a plain
    one (``validate_group_name``'s rule: every group folder made before other names were taken);
    otherwise ``%`` and the name's UTF-8 bytes, each byte outside ``A-Z a-z 0-9 _ . -`` written
    ``%XX`` (hex, upper case): ``app:billing`` is ``%app%3Abilling``, ``team/svc`` is ``%team%2Fsvc``.
    Reversible (``group_of_folder``), and never a name that leaves ``groups/`` or hides there.

    InvalidNameError for an empty name, one that is not text, and one whose folder name would pass
    255 bytes (a Kafka group id of about 80 characters or more of other scripts, or 250 of ASCII)."""
    if isinstance(name, str) and _GROUP_NAME.fullmatch(name) and name not in {".", ".."}:
        return name
    if not isinstance(name, str) or not name:
        raise InvalidNameError(f"invalid consumer group name {name!r}: give a non-empty string")
    try:
        raw = name.encode("utf-8")
    except UnicodeEncodeError:
        raise InvalidNameError(f"invalid consumer group name {name!r}: it is not valid Unicode text") from None
    folder = _ENCODED_PREFIX + "".join(chr(byte) if byte in _UNESCAPED else f"%{byte:02X}" for byte in raw)
    if len(folder) > _MAX_FOLDER_BYTES:
        raise InvalidNameError(
            f"invalid consumer group name {name[:40]!r}...: its folder name would take {len(folder)} bytes, "
            f"over the {_MAX_FOLDER_BYTES} a file system allows; use a shorter name"
        )
    return folder


def group_of_folder(folder: str) -> str | None:
    """The group whose folder (under ``groups/``) is named ``folder``; None for a name that
    ``group_folder`` does not make (it is no group's folder)."""
    if _GROUP_NAME.fullmatch(folder) and folder not in {".", ".."}:
        return folder
    if not folder.startswith(_ENCODED_PREFIX):
        return None
    raw = bytearray()
    at, end = 1, len(folder)
    while at < end:
        char = folder[at]
        if char == "%":
            digits = folder[at + 1 : at + 3]
            if len(digits) != 2 or not all(c in "0123456789ABCDEF" for c in digits):
                return None
            raw.append(int(digits, 16))
            at += 3
        elif ord(char) < 128 and ord(char) in _UNESCAPED:
            raw.append(ord(char))
            at += 1
        else:
            return None
    try:
        name = raw.decode("utf-8")
    except UnicodeDecodeError:
        return None
    # Only the one spelling group_folder makes: no plain name in disguise, no needless escape.
    try:
        return name if group_folder(name) == folder else None
    except InvalidNameError:
        return None


def validate_group_name(name: str) -> str:
    """The name, if it is a safe folder name for a consumer group; else ``InvalidNameError``."""
    if not isinstance(name, str) or not _GROUP_NAME.fullmatch(name) or name in {".", ".."}:
        raise InvalidNameError(
            f"invalid consumer group name {name!r}: use 1 to 200 letters, digits, '_', '-' or '.', "
            "not starting with '.' or '-' (it becomes a folder name under groups/)"
        )
    return name
