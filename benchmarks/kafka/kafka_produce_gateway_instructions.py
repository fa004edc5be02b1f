"""CPU instructions a record of the gateway answering a Produce, from the bytes received to the answer.

    valgrind --tool=callgrind --instr-atstart=no --callgrind-out-file=OUT \\
        python benchmarks/kafka/kafka_produce_gateway_instructions.py RECORDS [REQUESTS]

Feeds ``REQUESTS`` (default 10) Produce requests (v9, acks=1) of ``RECORDS`` records each, of
``bench_kafka.py``'s shape (100-byte values, distinct keys, no headers), to the gateway's
``ConnectionProtocol`` on asyncio, as the socket's reads would bring them (256 KiB at a time, asyncio's
read size), and waits for each answer: the framing, kio's decode of the request, the batch's CRC-32C,
``kafka_stored_records``, the producer's write into the segment's files, the answer. A batch over
the producer's inline limit (256 KiB: about 2,000 such records) goes the awaited way, its write in a
worker thread, as in the gateway. Callgrind's instrumentation is on (``callgrind_control -i on``) only
around the requests after two warm-up ones; divide the count by ``RECORDS * REQUESTS``. The socket's
own system calls are not in it (``strace -c -f -p`` on ``adiskq serve`` counts those).
"""

from __future__ import annotations

import asyncio
import datetime as dt
import io
import os
import subprocess
import sys
import tempfile
from typing import Any

from kio.schema.produce.v9.request import PartitionProduceData, ProduceRequest, TopicProduceData
from kio.schema.types import TopicName
from kio.serial import entity_writer

from adiskq.kafka._asyncio_transport import ConnectionProtocol
from adiskq.kafka._core import Connection, GatewayCore
from adiskq.kafka._deadlines import Deadline
from adiskq.kafka._server import KafkaGateway
from adiskq.kafka.wire.batch import KafkaRecord, encode_batch

READ_BYTES = 256 * 1024
BASE_MS = 1_700_000_000_000


def produce_frame(correlation_id: int, count: int, first_key: int) -> bytes:
    """A Produce v9 request frame (flexible header, client id "rdkafka") of one batch to bench-0."""
    records = [KafkaRecord(i, BASE_MS + i // 500, b"key-%d" % (first_key + i), b"v" * 100, []) for i in range(count)]
    batch = encode_batch(base_offset=0, records=records, base_timestamp_ms=BASE_MS)
    request = ProduceRequest(
        acks=1,
        timeout=dt.timedelta(seconds=5),
        topic_data=(
            TopicProduceData(name=TopicName("bench"), partition_data=(PartitionProduceData(index=0, records=batch),)),
        ),
    )
    body = io.BytesIO()
    entity_writer(ProduceRequest)(body, request)
    header = b"\x00\x00\x00\x09" + correlation_id.to_bytes(4, "big") + b"\x00\x07rdkafka\x00"
    message = header + body.getvalue()
    return len(message).to_bytes(4, "big") + message


class _Transport(asyncio.Transport):
    """Keeps what the connection writes; the answers are awaited through ``written``."""

    def __init__(self) -> None:
        super().__init__()
        self.answers: list[bytes] = []
        self.written = asyncio.Event()

    def write(self, data: Any) -> None:
        self.answers.append(bytes(data))
        self.written.set()

    def is_closing(self) -> bool:
        return False

    def set_write_buffer_limits(self, high: int | None = None, low: int | None = None) -> None:
        pass

    def get_write_buffer_size(self) -> int:
        return 0

    def pause_reading(self) -> None:
        pass

    def resume_reading(self) -> None:
        pass

    def abort(self) -> None:
        pass

    def close(self) -> None:
        pass


async def run(count: int, requests: int) -> None:
    root = tempfile.mkdtemp(prefix="adiskq-produce-instructions-")
    gateway = KafkaGateway(root, port=0)
    core = GatewayCore(
        root,
        partitions=1,
        flush="async",
        auto_create=True,
        shared=False,
        advertised_host="127.0.0.1",
        advertised_port=0,
    )
    gateway._core = core
    await core.topics.create("bench", 1)
    protocol = ConnectionProtocol(
        core,
        Connection.open("bench", core.topics),
        Deadline(),
        gateway._answer_now,
        max_request_bytes=100 << 20,
        request_timeout=30,
        idle_timeout=600,
    )
    transport = _Transport()
    protocol.connection_made(transport)
    task = asyncio.ensure_future(protocol.run())
    frames = [produce_frame(i, count, i * count) for i in range(requests + 2)]

    async def answered(frame: bytes) -> None:
        transport.written.clear()
        before = len(transport.answers)
        for at in range(0, len(frame), READ_BYTES):
            protocol.data_received(frame[at : at + READ_BYTES])
        while len(transport.answers) == before:
            await asyncio.wait_for(transport.written.wait(), 30)
            transport.written.clear()
        answer = transport.answers[-1]
        if answer[8 + 1 + 1 + 1 + 5 + 1 + 4 : 8 + 1 + 1 + 1 + 5 + 1 + 4 + 2] != b"\x00\x00":
            raise RuntimeError(f"the Produce was refused: {answer!r}")

    for frame in frames[:2]:  # warm: the topic's producer opens, schemas load
        await answered(frame)
    # Blocking on purpose: the count must start before the loop runs anything else.
    subprocess.run(["callgrind_control", "-i", "on", str(os.getpid())], check=True, capture_output=True)  # noqa: ASYNC221
    for frame in frames[2:]:
        await answered(frame)
    subprocess.run(["callgrind_control", "-i", "off", str(os.getpid())], check=True, capture_output=True)  # noqa: ASYNC221
    protocol.close(abort=True)
    task.cancel()
    await core.topics.aclose()


def main() -> int:
    count = int(sys.argv[1])
    requests = int(sys.argv[2]) if len(sys.argv) > 2 else 10
    asyncio.run(run(count, requests))
    return 0


if __name__ == "__main__":
    sys.exit(main())
