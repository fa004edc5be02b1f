"""The stream's zstd dictionaries on disk: ``dictionaries/zstd-NNNNNNNN.dict`` (format in
``adiskq/_sansio/compression.py``), written once each, fsynced before any record uses them, never removed.

A new version is linked into place under its name (``link`` fails rather than replace a file
another producer made under that name meanwhile), so a version's bytes never change once a record
may name it. Retention and vacuum delete segments only; nothing here is ever deleted.
"""

from __future__ import annotations

import contextlib
import functools
import os
import threading
from typing import Final

from .._errors import CorruptStreamError
from .._sansio.codec import crc32c
from .._sansio.compression import (
    MAX_DICTIONARY_VERSION,
    Dictionaries,
    dictionary_file_name,
    encode_dictionary_file,
    parse_dictionary_file,
    with_dictionary_id,
)
from .._sansio.naming import PARTS_DIR
from .files import DEFAULT_FILE_MODE, dir_mode, fsync_dir, read_file, write_all

__all__ = [
    "DICTIONARIES_DIR",
    "add_dictionary",
    "dictionary_versions",
    "partition_stream_path",
    "read_dictionary",
    "stream_dictionaries",
]

DICTIONARIES_DIR: Final = "dictionaries"
_PREFIX: Final = "zstd-"
_SUFFIX: Final = ".dict"


def dictionary_versions(stream_path: str) -> list[int]:
    """The versions of the stream's dictionary files, oldest first (none for a stream without)."""
    try:
        names = os.listdir(os.path.join(stream_path, DICTIONARIES_DIR))
    except FileNotFoundError:
        return []
    versions = []
    for name in names:
        number = name[len(_PREFIX) : -len(_SUFFIX)]
        if name.startswith(_PREFIX) and name.endswith(_SUFFIX) and number.isdigit() and len(number) == 8:
            versions.append(int(number))
    return sorted(versions)


def read_dictionary(stream_path: str, version: int) -> bytes:
    """The zstd dictionary of ``version``, checked; CorruptStreamError when its file is missing or damaged."""
    path = os.path.join(stream_path, DICTIONARIES_DIR, dictionary_file_name(version))
    data = read_file(path)
    if data is None:
        raise CorruptStreamError(
            f"zstd dictionary file {path} is missing: the records compressed with dictionary version {version} "
            "cannot be read until it is restored from a backup"
        )
    return parse_dictionary_file(data, version, path, crc32c)


def add_dictionary(stream_path: str, dictionary: bytes, *, mode: int = DEFAULT_FILE_MODE) -> int:
    """Store ``dictionary`` as the stream's next version (its id set to that version's) and return
    the version, once the file and its folder entry are on stable storage."""
    folder = os.path.join(stream_path, DICTIONARIES_DIR)
    with contextlib.suppress(FileExistsError):
        os.mkdir(folder, dir_mode(mode))
        fsync_dir(stream_path)
    while True:
        versions = dictionary_versions(stream_path)
        version = versions[-1] + 1 if versions else 1
        if version > MAX_DICTIONARY_VERSION:
            raise CorruptStreamError(
                f"{folder} holds {MAX_DICTIONARY_VERSION} dictionary versions, the most a stream can"
            )
        data = encode_dictionary_file(version, with_dictionary_id(dictionary, version), crc32c)
        temporary = os.path.join(folder, f".{dictionary_file_name(version)}.{os.getpid()}.{threading.get_ident()}.tmp")
        fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW | os.O_CLOEXEC, mode)
        try:
            try:
                write_all(fd, data)
                os.fsync(fd)
            finally:
                os.close(fd)
            try:
                os.link(temporary, os.path.join(folder, dictionary_file_name(version)))
            except FileExistsError:
                continue  # another producer stored this version first: take the next one
        finally:
            with contextlib.suppress(OSError):
                os.unlink(temporary)
        fsync_dir(folder)
        return version


def stream_dictionaries(stream_path: str) -> Dictionaries:
    """The dictionaries of the stream at ``stream_path``, loaded version by version as records need
    them. One per reader, not per process: a stream deleted and made again under the same path has
    other dictionaries under the same versions."""
    return Dictionaries(functools.partial(read_dictionary, stream_path))


def partition_stream_path(partition_directory: str) -> str:
    """The stream folder of a partition's folder (``STREAM/parts/NNNN``)."""
    parts = os.path.dirname(partition_directory)
    return os.path.dirname(parts) if os.path.basename(parts) == PARTS_DIR else parts
