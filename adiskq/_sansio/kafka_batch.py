"""Kafka record batches (v2) for the Kafka gateway: decode a Produce request's batches, encode Fetch's.

The format, its checks and the pure-Python reference are in ``kafka_codec.py``; compression is in
``kafka_compression.py``. The types and errors here are the reference's.
"""

from __future__ import annotations

from .kafka_codec import (
    DEFAULT_MAX_BYTES,
    KafkaBatch,
    KafkaBatchError,
    KafkaCorruptBatchError,
    KafkaRecord,
    KafkaUnsupportedBatchError,
    decode_batches,
    encode_batch,
)

__all__ = [
    "DEFAULT_MAX_BYTES",
    "KafkaBatch",
    "KafkaBatchError",
    "KafkaCorruptBatchError",
    "KafkaRecord",
    "KafkaUnsupportedBatchError",
    "decode_batches",
    "encode_batch",
]
