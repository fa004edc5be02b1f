"""The gateway's cost of one produce/fetch round trip of a small batch, request by request.

    python benchmarks/kafka/kafka_trip_instructions.py                 # CPU time a trip (psutil), 2,000 trips
    python benchmarks/kafka/kafka_trip_instructions.py --callgrind     # instructions a trip (valgrind), 200 trips
    python benchmarks/kafka/kafka_trip_instructions.py --server floor  # the same requests to kafka_trip_floor.py

Starts ``adiskq serve`` (under ``valgrind --tool=callgrind --instr-atstart=no`` with ``--callgrind``)
and replays, over two plain sockets, the requests librdkafka 2.16 sends in ``bench_kafka.py``'s round
trip (a Produce v10 of one 10-record batch, 100-byte values, acks=1; a Fetch v16 of that partition by
topic id, min_bytes 1, read_committed), built with kio in the same shape, so the gateway does exactly
what it does for the client, and nothing else varies: no client timers, no extra requests. Shapes:

- ``trip``: the consumer's Fetch is sent first and left waiting (``--pause`` seconds, so it is
  parked in its long poll), then the Produce; the Produce's answer and the Fetch's, woken by the
  write, are read. Two requests a trip, as librdkafka sends them with ``linger.ms`` above the trip.
- ``produce``: Produce requests alone, each answered before the next is sent.
- ``fetch``: a Produce, then a Fetch of its 10 records, answered at once (the data is there):
  less the ``produce`` figure, a Fetch that does not wait (librdkafka's next Fetch when its last
  answer left records behind).

With ``--callgrind`` the instrumentation is on (``callgrind_control -i on``) only around the
measured trips, and a run of the same shape with no trips gives the count of the toggling itself,
which is subtracted: the figure is the gateway's user-space instructions a trip (the kernel's share,
the system calls, is not counted; CPU time without ``--callgrind`` counts it).
"""

from __future__ import annotations

import argparse
import datetime as dt
import io
import os
import re
import shutil
import socket
import struct
import subprocess
import sys
import tempfile
import time
from typing import Any

import psutil

# benchmarks/, for the modules the benchmarks share (callgrind.py, peers/compare/, bench_codec.py)
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from callgrind import MISSING, instrument, totals, zero
from callgrind import command as callgrind_command
from kio.schema.fetch.v16.request import FetchPartition, FetchRequest, FetchTopic, ReplicaState
from kio.schema.metadata.v12.request import MetadataRequest, MetadataRequestTopic
from kio.schema.produce.v10.request import PartitionProduceData, ProduceRequest, TopicProduceData
from kio.schema.types import TopicName
from kio.serial import entity_writer

from adiskq.kafka._core import GatewayCore
from adiskq.kafka.wire.batch import KafkaRecord, encode_batch

TOPIC = "trips"
CLIENT_ID = b"rdkafka"


def _message(request: Any, correlation_id: int) -> bytes:
    """A request frame as librdkafka writes it: header v2 (client id, no tagged fields), payload."""
    body = io.BytesIO()
    entity_writer(type(request))(body, request)
    header = struct.pack(">hhih", request.__api_key__, request.__version__, correlation_id, len(CLIENT_ID))
    message = header + CLIENT_ID + b"\0" + body.getvalue()
    return struct.pack(">i", len(message)) + message


def produce_frame(trip: int, correlation_id: int) -> bytes:
    """A Produce v10 of one batch of 10 records, as librdkafka's producer sends it after flush()."""
    now = int(time.time() * 1000)
    records = [KafkaRecord(i, now, b"%d-%d" % (trip, i), b"v" * 100, []) for i in range(10)]
    batch = encode_batch(base_offset=0, records=records, base_timestamp_ms=now)
    partition = PartitionProduceData(index=0, records=batch)
    request = ProduceRequest(
        transactional_id=None,
        acks=1,
        timeout=dt.timedelta(seconds=30),
        topic_data=(TopicProduceData(name=TopicName(TOPIC), partition_data=(partition,)),),
    )
    return _message(request, correlation_id)


def fetch_frame(offset: int, correlation_id: int, max_wait_ms: int) -> bytes:
    """A Fetch v16 of partition 0 from ``offset``, as librdkafka's consumer sends it."""
    partition = FetchPartition(
        partition=0,
        current_leader_epoch=0,
        fetch_offset=offset,
        last_fetched_epoch=-1,
        log_start_offset=-1,
        partition_max_bytes=1 << 20,
    )
    request = FetchRequest(
        cluster_id=None,
        replica_state=ReplicaState(replica_id=-1, replica_epoch=-1),
        max_wait=dt.timedelta(milliseconds=max_wait_ms),
        min_bytes=1,
        max_bytes=52_428_800,
        isolation_level=1,
        session_id=0,
        session_epoch=-1,
        topics=(FetchTopic(topic_id=GatewayCore.topic_id(TOPIC), partitions=(partition,)),),
        forgotten_topics_data=(),
        rack_id="",
    )
    return _message(request, correlation_id)


def answer(sock: socket.socket) -> bytes:
    """One response frame's bytes after its size."""
    size = struct.unpack(">i", _exactly(sock, 4))[0]
    return _exactly(sock, size)


def _exactly(sock: socket.socket, count: int) -> bytes:
    data = b""
    while len(data) < count:
        chunk = sock.recv(count - len(data))
        if not chunk:
            raise ConnectionError(f"the gateway closed the connection after {len(data)} of {count} bytes")
        data += chunk
    return data


class Client:
    """A producer's connection and a consumer's, and the offset the consumer reads next."""

    def __init__(self, port: int, max_wait_ms: int, pause: float) -> None:
        self.producer = socket.create_connection(("127.0.0.1", port))
        self.consumer = socket.create_connection(("127.0.0.1", port))
        for sock in (self.producer, self.consumer):
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.max_wait_ms = max_wait_ms
        self.pause = pause
        self.correlation_id = 0
        self.next_offset = 0

    def _id(self) -> int:
        self.correlation_id += 1
        return self.correlation_id

    def create_topic(self) -> None:
        """A Metadata request naming the topic, which the gateway creates (as librdkafka's first one)."""
        topic = MetadataRequestTopic(topic_id=None, name=TopicName(TOPIC))
        request = MetadataRequest(
            topics=(topic,), allow_auto_topic_creation=True, include_topic_authorized_operations=False
        )
        self.producer.sendall(_message(request, self._id()))
        answer(self.producer)

    def produce(self, trip: int) -> None:
        self.producer.sendall(produce_frame(trip, self._id()))
        reply = answer(self.producer)
        # After the correlation id and the (empty) tagged fields: one topic, its name, one partition.
        error_code, base_offset = struct.unpack_from(">hq", reply, 4 + 1 + 1 + 1 + len(TOPIC) + 1 + 4)
        if error_code != 0:
            raise RuntimeError(f"the gateway refused the Produce: error code {error_code}")
        self.next_offset = base_offset + 10

    def trip(self, trip: int) -> None:
        """The consumer's Fetch waits; the Produce wakes it; both answers read."""
        fetch = fetch_frame(self.next_offset, self._id(), self.max_wait_ms)
        produce = produce_frame(trip, self._id())  # built before the Fetch goes, off the wait
        self.consumer.sendall(fetch)
        time.sleep(self.pause)  # the Fetch is parked in its long poll by now
        self.producer.sendall(produce)
        answer(self.producer)
        fetched = answer(self.consumer)
        if len(fetched) < 10 * 100:
            raise RuntimeError(f"the Fetch came back with {len(fetched)} bytes, not the 10 records")
        self.next_offset += 10

    def fetch_at_hand(self, trip: int) -> None:
        """A Produce, then a Fetch of its 10 records, answered at once."""
        self.produce(trip)
        self.consumer.sendall(fetch_frame(self.next_offset - 10, self._id(), self.max_wait_ms))
        if len(answer(self.consumer)) < 10 * 100:
            raise RuntimeError("the Fetch of records at hand came back without them")


def start(root: str, callgrind_out: str | None, server: str) -> tuple[subprocess.Popen[bytes], int]:
    if server == "floor":
        command = [sys.executable, os.path.join(os.path.dirname(os.path.abspath(__file__)), "kafka_trip_floor.py")]
    else:
        command = [sys.executable, "-m", "adiskq", "serve", root, "--kafka", "127.0.0.1:0"]
    if callgrind_out is not None:
        command = callgrind_command(command, out_file=callgrind_out, at_start=False, log_file=f"{callgrind_out}.log")
    process = subprocess.Popen(command, stderr=subprocess.PIPE)
    assert process.stderr is not None
    line = process.stderr.readline().decode()
    found = re.search(r"listening on 127\.0\.0\.1:(\d+)", line)
    if not found:
        process.kill()
        raise RuntimeError(f"the gateway did not start: {line}")
    return process, int(found.group(1))


def run(
    shape: str, trips: int, *, callgrind: bool, max_wait_ms: int, pause: float, server: str = "gateway"
) -> dict[str, float]:
    """Start a gateway, warm it, measure ``trips`` of ``shape``; its cost a trip."""
    root = tempfile.mkdtemp(prefix="adiskq-trip-")
    out = os.path.join(root, "callgrind.out") if callgrind else None
    process, port = start(os.path.join(root, "streams"), out, server)
    try:
        client = Client(port, max_wait_ms, pause)
        client.create_topic()
        for trip in range(20):  # the topic is made, schemas loaded, the long poll's timer made
            client.produce(trip)
            client.trip(trip)
            client.fetch_at_hand(trip)
        step = {"trip": client.trip, "produce": client.produce, "fetch": client.fetch_at_hand}[shape]
        gateway = psutil.Process(process.pid)
        if callgrind:
            zero(process.pid)
            instrument(process.pid, True)
        before = gateway.cpu_times()
        started = time.perf_counter()
        for trip in range(trips):
            step(trip)
        wall = time.perf_counter() - started
        after = gateway.cpu_times()
        if callgrind:
            instrument(process.pid, False)
        client.producer.close()
        client.consumer.close()
    finally:
        process.terminate()
        process.wait(120)
        assert process.stderr is not None
        process.stderr.close()
    result = {
        "cpu_us": ((after.user - before.user) + (after.system - before.system)) / max(trips, 1) * 1e6,
        "system_us": (after.system - before.system) / max(trips, 1) * 1e6,
        "wall_us": wall / max(trips, 1) * 1e6,
    }
    if out is not None:
        result["instructions"] = totals(out)
    shutil.rmtree(root, ignore_errors=True)
    return result


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--shape", choices=("trip", "produce", "fetch"), default="trip")
    parser.add_argument("--callgrind", action="store_true", help="count instructions under valgrind")
    parser.add_argument("--trips", type=int, default=None, help="2,000 (200 with --callgrind)")
    parser.add_argument("--max-wait-ms", type=int, default=500, help="the Fetch's max_wait_ms")
    parser.add_argument("--pause", type=float, default=None, help="seconds the Fetch waits before the Produce")
    parser.add_argument(
        "--server",
        choices=("gateway", "floor"),
        default="gateway",
        help="floor: kafka_trip_floor.py, an asyncio server that only answers (the event loop's and kernel's share)",
    )
    args = parser.parse_args(argv)
    if args.callgrind and shutil.which("valgrind") is None:
        parser.error(f"--callgrind: {MISSING}")
    trips = args.trips if args.trips is not None else (200 if args.callgrind else 2000)
    pause = args.pause if args.pause is not None else (0.05 if args.callgrind else 0.001)

    def measure(count: int) -> dict[str, float]:
        return run(
            args.shape, count, callgrind=args.callgrind, max_wait_ms=args.max_wait_ms, pause=pause, server=args.server
        )

    measured = measure(trips)
    line = (
        f"{args.shape}: {args.server} CPU {measured['cpu_us']:,.0f} µs a trip"
        f" (system {measured['system_us']:,.0f}) over {trips} trips"
    )
    if args.callgrind:
        empty = measure(0)
        per_trip = (measured["instructions"] - empty["instructions"]) / trips
        line += f"; {per_trip:,.0f} instructions a trip (the toggling's {empty['instructions']:,} subtracted)"
    print(line)
    return 0


if __name__ == "__main__":
    sys.exit(main())
