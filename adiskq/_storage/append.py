"""The references of the compiled append (``adiskq/_csrc/log/append.c``): an inline push's two writes.

``append_record`` writes a record at the end of ``.data``, then its ``.index`` entry; ``append_one``
does the same and notes the record's buffered time, tag and key index entries. Each name here is
the compiled function when the core is built, else its reference; ``tests/storage/test_append_record.py``
holds each pair to the same files, lists, calls and errors.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Final

from .._sansio.entries import INDEX_ENTRY, TAG_ENTRY_BYTES, TIMEINDEX_ENTRY
from .._sansio.native import NATIVE

__all__ = ["append_one", "append_one_reference", "append_record", "append_record_reference"]


def append_record_reference(
    write: Callable[[int, bytes], int], data_fd: int, index_fd: int, record: bytes, offset: int, position: int
) -> None:
    """Write ``record`` at the end of ``.data``, then its ``.index`` entry; the reference of the
    compiled core's ``append_record`` (adiskq/_csrc/log/append.c, which says the contract), and what the
    pure-Python core runs. ``write`` is ``os.write`` as the caller finds it (tests replace it)."""
    _write_through(write, data_fd, record)
    try:
        _write_through(write, index_fd, INDEX_ENTRY.pack(offset, position, len(record)))
    except BaseException as error:
        error.index_entry = True  # type: ignore[attr-defined]
        raise


def _write_through(write: Callable[[int, bytes], int], fd: int, data: bytes) -> None:
    done = 0
    while done < len(data):
        written = write(fd, data[done:] if done else data)
        if not 0 <= written <= len(data) - done:
            raise ValueError("append_record: write() returned an impossible byte count")
        done += written


append_record: Final = NATIVE.append_record if NATIVE is not None else append_record_reference


def append_one_reference(
    write: Callable[[int, bytes], int],
    data_fd: int,
    index_fd: int,
    record: bytes,
    offset: int,
    position: int,
    timestamp_ns: int,
    time_buffer: list[bytes],
    tag_entry: bytes,
    tag_buffer: list[bytes],
    key_hash: int,
    key_buffer: list[int] | None,
) -> None:
    """``append_record``, then the record's buffered entries noted: its ``.timeindex`` entry on
    ``time_buffer``, ``tag_entry`` on ``tag_buffer``, ``key_hash`` on ``key_buffer`` (unless None).
    The reference of the compiled core's ``append_one`` (adiskq/_csrc/log/append.c, which says the
    contract): every argument checked before the first write, the lists untouched by a failed one."""
    if not (
        type(record) is bytes
        and isinstance(offset, int)
        and isinstance(position, int)
        and isinstance(timestamp_ns, int)
        and type(time_buffer) is list
        and type(tag_entry) is bytes
        and type(tag_buffer) is list
        and type(key_hash) is int
        and (key_buffer is None or type(key_buffer) is list)
    ):
        raise TypeError(
            "append_one(write, data_fd, index_fd, record: bytes, offset: int, position: int, timestamp_ns: int, "
            "time_buffer: list, tag_entry: bytes, tag_buffer: list, key_hash: int, key_buffer: list | None)"
        )
    if len(tag_entry) != TAG_ENTRY_BYTES:
        raise ValueError("append_one: a .tagindex entry is 4 bytes")
    if not 0 <= key_hash <= 0xFFFFFFFF:
        raise OverflowError("append_one: a key index entry is a u32")
    if not (0 <= offset < 2**64 and 0 <= position < 2**64 and -(2**63) <= timestamp_ns < 2**63):
        raise OverflowError("append_one: an offset, position or timestamp out of its field's range")
    time_entry = TIMEINDEX_ENTRY.pack(offset, timestamp_ns)
    append_record_reference(write, data_fd, index_fd, record, offset, position)
    time_buffer.append(time_entry)
    tag_buffer.append(tag_entry)
    if key_buffer is not None:
        key_buffer.append(key_hash)


append_one: Final = NATIVE.append_one if NATIVE is not None else append_one_reference
