"""Records per second of the Kafka record batch codec: the compiled core beside the pure-Python reference.

What the Kafka gateway does per record on its hot paths: ``decode_batches`` of a Produce request's
records field and ``encode_batch`` of a Fetch response's, on batches of 1,000 records with 100-byte
values and distinct 12-byte keys, no headers (as librdkafka's clients produce them); also a batch
with two headers a record, zstd- and lz4-compressed batches (decompression in cramjam, then the
same decoder), and ``encode_batch_from_messages`` of the stored Messages a Fetch reads. Both cores run in the same process: the compiled one through ``wire.batch`` and the
reference through ``wire.codec``, so the ratio is measured on one machine at one moment.

    python benchmarks/kafka/bench_kafka_codec.py            # medians of 9 repeats of ~0.2 s each
    python benchmarks/kafka/bench_kafka_codec.py --quick    # a second: checks that it works
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable

# benchmarks/, for the modules the benchmarks share (callgrind.py, peers/compare/, bench_codec.py)
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from bench_codec import time_per_call
from peers.compare.common import BATCH_SIZE, VALUES, key

from adiskq._sansio.values import EMPTY_HEADERS, Message
from adiskq.kafka.wire import batch as kafka_batch
from adiskq.kafka.wire import codec as kafka_codec
from adiskq.kafka.wire.batch import KafkaRecord

BASE_MS = 1_790_000_000_000


def workloads() -> dict[str, tuple[Callable[[], object], Callable[[], object]]]:
    """Each workload's (compiled, reference) call over one batch, after checking both give the same answer."""
    plain = [KafkaRecord(i, BASE_MS + i, key(i), VALUES[i], []) for i in range(BATCH_SIZE)]
    headed = [
        r._replace(headers=[("content-type", b"application/json"), ("trace", b"%016x" % i)])
        for i, r in enumerate(plain)
    ]
    out: dict[str, tuple[Callable[[], object], Callable[[], object]]] = {}
    for name, records in (("plain", plain), ("2 headers", headed)):
        encoded = kafka_batch.encode_batch(base_offset=0, records=records, base_timestamp_ms=BASE_MS)
        assert encoded == kafka_codec.encode_batch(base_offset=0, records=records, base_timestamp_ms=BASE_MS)
        assert kafka_batch.decode_batches(encoded) == kafka_codec.decode_batches(encoded)
        out[f"encode_batch, {name}"] = (
            lambda r=records: kafka_batch.encode_batch(base_offset=0, records=r, base_timestamp_ms=BASE_MS),
            lambda r=records: kafka_codec.encode_batch(base_offset=0, records=r, base_timestamp_ms=BASE_MS),
        )
        out[f"decode_batches, {name}"] = (
            lambda e=encoded: kafka_batch.decode_batches(e),
            lambda e=encoded: kafka_codec.decode_batches(e),
        )
    messages = [
        Message(0, 1000 + i, (BASE_MS + i) * 1_000_000, key(i), VALUES[i], EMPTY_HEADERS) for i in range(BATCH_SIZE)
    ]
    from_messages = kafka_batch.encode_batch_from_messages(messages)
    assert from_messages == kafka_codec.encode_messages(messages)
    out["encode_batch_from_messages"] = (
        lambda: kafka_batch.encode_batch_from_messages(messages),
        lambda: kafka_codec.encode_messages(messages),
    )
    for codec, codec_name in ((4, "zstd"), (3, "lz4")):
        compressed = kafka_batch.encode_batch(
            base_offset=0, records=plain, base_timestamp_ms=BASE_MS, compression=codec
        )
        assert kafka_batch.decode_batches(compressed) == kafka_codec.decode_batches(compressed)
        out[f"decode_batches, {codec_name}"] = (
            lambda c=compressed: kafka_batch.decode_batches(c),
            lambda c=compressed: kafka_codec.decode_batches(c),
        )
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="a second or so: checks that it works")
    args = parser.parse_args()
    repeats, target_s = (2, 0.02) if args.quick else (9, 0.2)
    if not kafka_batch.COMPILED:
        raise SystemExit("the compiled core is not in use (built? ADISKQ_NO_EXTENSIONS set?): nothing to compare")
    print(f"batches of {BATCH_SIZE} records, 100-byte values, 12-byte keys; median of {repeats} repeats")
    print(f"{'workload':<26} {'compiled rec/s':>15} {'reference rec/s':>16} {'ratio':>7}")
    for name, (compiled, reference) in workloads().items():
        fast = BATCH_SIZE / time_per_call(compiled, repeats, target_s)
        slow = BATCH_SIZE / time_per_call(reference, repeats, target_s)
        print(f"{name:<26} {fast:>15,.0f} {slow:>16,.0f} {fast / slow:>6.1f}x")


if __name__ == "__main__":
    main()
