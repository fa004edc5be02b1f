"""A producer's compression of values with the stream's zstd dictionary (``compression="zstd"``).

Compression is the stream's setting (``settings.json``): every producer of a stream created with
``compression="zstd"`` compresses, with or without the argument. A producer compresses with the
newest dictionary version when it opens (or with the one given as ``zstd_dictionary``, stored first
as a new version when it differs from the newest). A stream with
no dictionary yet gets one trained from the first ``TRAINING_SAMPLES`` values this producer pushes:
those are written compressed with plain zstd (frames that name no dictionary), each one whose frame
is smaller than it (the others as they are: a record says whether it is compressed, so readers need
nothing else), then the dictionary is trained in a worker thread, stored and fsynced
(``add_dictionary``), and the values after it are compressed with it. Nothing is held back: every
push is written when it is made. A ``push_many`` that brings the samples to ``TRAINING_SAMPLES``
trains from its own values before it is written, so a stream's first large batch is stored
compressed with the new dictionary.
"""

from __future__ import annotations

import functools
import logging
from typing import Final

import anyio
import anyio.to_thread

from .._errors import InvalidArgumentError
from .._sansio.compression import (
    COMPRESSED,
    DICTIONARY_ID_BASE,
    ZSTD_DICTIONARY_MAGIC,
    Dictionaries,
    ReferencePlain,
    import_zstandard,
)
from .._sansio.native import NATIVE
from .._storage.dictionaries import add_dictionary, dictionary_versions, read_dictionary, stream_dictionaries

__all__ = ["TRAINING_SAMPLES", "ValueCompression", "check_dictionary"]

logger = logging.getLogger("adiskq")

TRAINING_SAMPLES: Final = 2000  # values a new stream's first dictionary is trained from
DICTIONARY_BYTES: Final = 16384  # zstd's advice: ~100x smaller than the samples, at most ~100 KiB
# Training needs values that differ: if these many fail to train a dictionary, the producer stops
# trying and writes values uncompressed (logged once).
_MOST_TRAINING_SAMPLES: Final = 4 * TRAINING_SAMPLES


def check_dictionary(dictionary: object) -> bytes | None:
    """A user's ``zstd_dictionary=``, checked before any I/O."""
    if dictionary is None:
        return None
    if not isinstance(dictionary, bytes):
        raise TypeError(f"zstd_dictionary takes the bytes of a zstd dictionary, not {type(dictionary).__name__}")
    if len(dictionary) < 8 or int.from_bytes(dictionary[:4], "little") != ZSTD_DICTIONARY_MAGIC:
        raise InvalidArgumentError(
            "zstd_dictionary: a zstd dictionary starts with the magic number 0xEC30A437; give one made by "
            "`zstd --train` or zstandard.train_dictionary (raw content has no id for records to name it by)"
        )
    return dictionary


class ValueCompression:
    """What a compressing producer does to each value: compress it with the current dictionary, or
    (while the stream has none) keep it as a training sample and compress it with plain zstd, kept
    as it is when its frame would not be smaller."""

    def __init__(self, stream_path: str, mode: int, dictionaries: Dictionaries, version: int | None) -> None:
        self._stream_path = stream_path
        self._mode = mode
        self._dictionaries = dictionaries
        self._samples: list[bytes] | None = None
        self._training = False
        self.compress: object = None
        # The compiled core's prepared dictionary, which push_many's batch encoder compresses with;
        # None while training, or where the reference compresses.
        self.prepared: object = None
        self.wants_training = False
        self._plain: object = None  # plain zstd's compress, while the stream has no dictionary
        if version is None:
            self._samples = []
            self._plain = _plain_compressor(dictionaries.level)
        else:
            self._use(version)

    @classmethod
    def open(cls, stream_path: str, mode: int, given: bytes | None) -> ValueCompression:
        """Blocking (a worker thread's): the dictionary version to compress with, the given one
        stored first when it is new."""
        versions = dictionary_versions(stream_path)
        dictionaries = stream_dictionaries(stream_path)
        if given is not None:
            newest = read_dictionary(stream_path, versions[-1]) if versions else None
            # The id field (bytes 4..8) is the stream's own: compare the rest.
            if newest is None or newest[:4] + newest[8:] != given[:4] + given[8:]:
                versions.append(add_dictionary(stream_path, given, mode=mode))
        return cls(stream_path, mode, dictionaries, versions[-1] if versions else None)

    def _use(self, version: int) -> None:
        dictionaries = self._dictionaries
        dictionary_id = DICTIONARY_ID_BASE + version
        dictionaries.need(dictionary_id, 0)
        prepared = dictionaries.compiled.get(dictionary_id)
        if prepared is not None and NATIVE is not None:
            self.compress = functools.partial(NATIVE.zstd_compress, prepared)
            self.prepared = prepared
        else:
            reference = dictionaries.reference[dictionary_id]
            self.compress = reference.compress
        self._samples = None
        self._plain = None
        self.wants_training = False

    @property
    def wants_dictionary(self) -> bool:
        """True while the stream has no dictionary and this producer gathers samples for one."""
        return self._samples is not None and not self._training

    def apply(self, value: bytes) -> tuple[bytes, int]:
        """What to store for ``value`` and the record's attributes."""
        compress = self.compress
        if compress is not None:
            return compress(value), COMPRESSED  # type: ignore[operator]
        samples = self._samples
        if samples is not None and len(samples) < _MOST_TRAINING_SAMPLES:
            samples.append(value)
            if len(samples) % TRAINING_SAMPLES == 0 and not self._training:
                self.wants_training = True
        plain = self._plain
        if plain is not None:
            frame: bytes = plain(value)  # type: ignore[operator]
            if len(frame) < len(value):
                return frame, COMPRESSED
        return value, 0

    async def train_before(self, values: list[bytes]) -> None:
        """A batch about to be written: if it brings the samples to ``TRAINING_SAMPLES``, train from
        them (its values included) now, so the batch is compressed with the new dictionary."""
        samples = self._samples
        if samples is None or self._training or len(samples) + len(values) < TRAINING_SAMPLES:
            return
        samples.extend(values[: TRAINING_SAMPLES - len(samples)])
        self.wants_training = True
        await self.train()

    async def train(self) -> None:
        """Train a dictionary from the samples in a worker thread, store it, and compress from now
        on; a training that fails (values too alike, too few) leaves values uncompressed."""
        samples = self._samples
        if samples is None or self._training:
            return
        self.wants_training = False
        self._training = True
        taken = list(samples)
        try:
            with anyio.CancelScope(shield=True):  # a stored dictionary is used, whoever waited for it
                version = await anyio.to_thread.run_sync(self._train_and_store, taken)
        finally:
            self._training = False
        if version is not None:
            self._use(version)
        elif len(taken) >= _MOST_TRAINING_SAMPLES:
            logger.warning(
                "adiskq: %s: no zstd dictionary could be trained from %d values; they are stored uncompressed",
                self._stream_path,
                len(taken),
            )
            self._samples = None  # values go on in plain zstd frames

    def _train_and_store(self, samples: list[bytes]) -> int | None:
        zstd = import_zstandard()
        try:
            trained = zstd.train_dictionary(DICTIONARY_BYTES, samples)  # type: ignore[attr-defined]
        except zstd.ZstdError:  # type: ignore[attr-defined]
            return None
        return add_dictionary(self._stream_path, trained.as_bytes(), mode=self._mode)


def _plain_compressor(level: int) -> object:
    """Plain zstd's compress (frames that name no dictionary): libzstd's through the compiled core
    where it can be loaded, the ``zstandard`` binding's otherwise."""
    if NATIVE is not None:
        prepared = NATIVE.zstd_prepare(None, level)
        if prepared is not None:
            return functools.partial(NATIVE.zstd_compress, prepared)
    return ReferencePlain(level).compress
