"""CPU instructions a record of a Produce's decode, the step by step way and straight to stored records.

    valgrind --tool=callgrind --instr-atstart=no --callgrind-out-file=/dev/null \\
        python benchmarks/kafka/kafka_produce_instructions.py PATH     # PATH: step, straight, none

Runs one path 10 times over a 1,000-record batch of ``bench_kafka.py``'s shape (100-byte values,
distinct keys, no headers) with callgrind's instrumentation on (``callgrind_control -i on``) only
around that loop; subtract the ``none`` run's count (the two ``callgrind_control`` calls) and divide
by 10,000 for instructions a record. ``step``: the compiled ``decode_batches`` to ``KafkaRecord``s,
the mapping to ``Record``s in Python, the producer's compiled ``encode_records``; ``straight``: the
gateway's ``decode_produce`` and ``records_from_batches`` (one ``kafka_stored_records`` call).
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable

from adiskq._sansio.core import encode_records
from adiskq.kafka._records import decode_produce, records_from_batches
from adiskq.kafka.wire.batch import KafkaRecord, decode_batches, encode_batch

COUNT = 1000
BASE_MS = 1_700_000_000_000
RECORDS = [KafkaRecord(i, BASE_MS + i // 300, b"key-%d" % i, b"v" * 100, []) for i in range(COUNT)]
BATCH = encode_batch(base_offset=0, records=RECORDS, base_timestamp_ms=BASE_MS)


def step() -> object:
    return encode_records(records_from_batches(decode_batches(BATCH)), 0, 1, None)


def straight() -> object:
    return records_from_batches(decode_produce(BATCH))


def main() -> int:
    paths: dict[str, Callable[[], object]] = {"step": step, "straight": straight, "none": lambda: None}
    path = paths[sys.argv[1]]
    for _ in range(3):  # warm: first calls fill caches, intern names
        path()
    subprocess.run(["callgrind_control", "-i", "on", str(os.getpid())], check=True, capture_output=True)
    for _ in range(10):
        path()
    subprocess.run(["callgrind_control", "-i", "off", str(os.getpid())], check=True, capture_output=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
