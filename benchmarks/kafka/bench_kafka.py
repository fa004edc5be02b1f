"""The Kafka gateway beside the library's own paths: librdkafka (confluent-kafka) against ``adiskq serve``.

    python benchmarks/kafka/bench_kafka.py            # 200,000 messages, 5 s of latency samples
    python benchmarks/kafka/bench_kafka.py --quick    # small sizes, for the test that keeps this working
    python benchmarks/kafka/bench_kafka.py --only fetch   # the fetch figures alone
    python benchmarks/kafka/bench_kafka.py --only produce # the produce figures alone
    python benchmarks/kafka/bench_kafka.py --only transactions  # transactions of 100 records, beside Kafka's

Values are 100 bytes with distinct keys. The gateway runs as ``adiskq serve`` in a process of its own
(``--flush async``), the client in this one: both share the machine's cores. Figures:

- produce: a librdkafka producer (linger.ms=5, acks=1) sending N messages to one partition, to the
  last delivery report; beside ``Producer.push_many`` of the same messages in batches of 1,000;
- fetch: a librdkafka consumer tuned for throughput (``THROUGHPUT_SETTINGS``) reading the N messages
  from offset 0; beside a library ``Consumer`` reading them with ``batches()``. Context lines: the CPU a message of the client's main thread
  (confluent-kafka's Message objects), of librdkafka's threads and of the gateway, the Fetch requests
  sent, the same consumer with librdkafka's default queue settings, and kcat (librdkafka in C)
  reading the same messages;
- end to end: one message every 0.5 ms (2,000 msg/s) from a librdkafka producer (linger.ms=0) to a
  librdkafka consumer, on the wall clock of this one process; beside library push -> consumer;
- gateway CPU per round trip: the gateway process's CPU time (user + system) over many round trips
  of one small batch (10 messages produced as one Produce and acknowledged, then fetched by a
  Fetch waiting in the long poll), per round trip, with the requests a trip took, counted by type
  from librdkafka's statistics; beside it the same 10 messages produced with ``linger.ms=0`` (a
  Produce per ``produce()`` call while one is in flight), the benchmark's trip before 2026-11-28;
- the protocol layer alone, in this process: kio's decode of a Produce request holding a 1,000-record
  batch, and the encode of the Fetch response holding it (the gateway's own, and kio's, which it
  used before), next to the record batch codec's share.
"""

from __future__ import annotations

import argparse
import io
import json
import os
import pathlib
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from typing import Any

import anyio
import kafka_transactions_workload
import psutil
from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition

import adiskq

VALUE = b"v" * 100
HERE = os.path.dirname(os.path.abspath(__file__))


def start_gateway(root: str, adiskq_from: str | None = None) -> tuple[subprocess.Popen[bytes], int]:
    """``adiskq serve ROOT`` on a free port (the adiskq package found in the folder ``adiskq_from``
    if given, else the one this process would import); the process and its port."""
    # ``python -m`` looks in its working folder first: run there, so that the package is that one.
    folder = None if adiskq_from is None else os.path.abspath(adiskq_from)
    env = None if folder is None else {**os.environ, "PYTHONPATH": folder}
    process = subprocess.Popen(
        [sys.executable, "-m", "adiskq", "serve", root, "--kafka", "127.0.0.1:0"],
        stderr=subprocess.PIPE,
        env=env,
        cwd=folder,
    )
    assert process.stderr is not None
    line = process.stderr.readline().decode()
    found = re.search(r"listening on 127\.0\.0\.1:(\d+)", line)
    if not found:
        raise RuntimeError(f"the gateway did not start: {line}")
    return process, int(found.group(1))


def stop_gateway(process: subprocess.Popen[bytes]) -> None:
    """Stop a gateway ``start_gateway`` started, as SIGTERM stops ``adiskq serve``."""
    process.terminate()
    process.wait(30)
    assert process.stderr is not None
    process.stderr.close()


def kafka_produce(bootstrap: str, topic: str, count: int) -> float:
    """Messages per second of a librdkafka producer to the last delivery report."""
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5, "acks": 1, "batch.num.messages": 10_000})
    producer.list_topics(topic, timeout=10)  # metadata (and the topic) before the clock starts
    started = time.perf_counter()
    for i in range(count):
        while True:
            try:
                producer.produce(topic, VALUE, b"key-%d" % i, partition=0)
                break
            except BufferError:
                producer.poll(0.001)
    assert producer.flush(60) == 0
    return count / (time.perf_counter() - started)


def thread_runtimes(process: psutil.Process) -> dict[int, int]:
    """Nanoseconds each thread of a process has run, by thread id, from the scheduler.

    ``psutil``'s ``cpu_times()`` counts in clock ticks (10 ms): a short measurement, such as ``--quick``'s 40
    round trips of about 300 µs, could read 0 or 10 ms. The first field of
    ``/proc/PID/task/TID/schedstat`` is the thread's runtime to the nanosecond.
    """
    runtimes = {}
    for task in pathlib.Path(f"/proc/{process.pid}/task").iterdir():
        try:
            runtimes[int(task.name)] = int((task / "schedstat").read_text().split()[0])
        except FileNotFoundError:  # the thread ended while the folder was read
            continue
    return runtimes


def seconds_by_thread(before: dict[int, int], after: dict[int, int]) -> dict[int, float]:
    """CPU seconds each thread ran from ``before`` to ``after`` (``thread_runtimes``), by thread id.

    A thread that ended in between is left out; the gateway's threads live as long as it does.
    """
    return {thread: (ran - before.get(thread, 0)) / 1e9 for thread, ran in after.items()}


def cpu_seconds_between(before: dict[int, int], after: dict[int, int]) -> float:
    """CPU seconds a process's threads ran from ``before`` to ``after``, together."""
    return sum(seconds_by_thread(before, after).values())


# What a user tuning a librdkafka consumer for throughput sets. With librdkafka's defaults (2.4 on),
# a partition whose local queue holds queued.min.messages (100,000) is not fetched again for
# fetch.queue.backoff.ms (1 s): the application drains the queue in a fraction of that, then waits.
THROUGHPUT_SETTINGS: dict[str, object] = {"queued.min.messages": 1_000_000, "fetch.queue.backoff.ms": 10}


def kafka_fetch(
    bootstrap: str, topic: str, count: int, gateway: psutil.Process, settings: dict[str, object] | None = None
) -> dict[str, float]:
    """Messages per second of a librdkafka consumer (``settings`` added to its configuration) reading
    ``count`` messages from offset 0, and where the CPU went, per message: the gateway's, this
    process's main thread (confluent-kafka's Message objects and this loop) and librdkafka's own
    threads (the broker thread parses the Fetch responses); with the Fetch requests librdkafka sent
    and the bytes it received a request."""
    statistics_seen: list[str] = []
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": "bench",
            "enable.auto.commit": False,
            "fetch.max.bytes": 52428800,
            "statistics.interval.ms": 1000,  # the Fetch requests' count and bytes, read after the run
            "stats_cb": statistics_seen.append,
            **(settings or {}),
        }
    )
    consumer.assign([TopicPartition(topic, 0, 0)])
    main_thread = threading.get_native_id()
    client = psutil.Process()
    threads_before, gateway_before = thread_runtimes(client), thread_runtimes(gateway)
    got = 0
    started = time.perf_counter()
    while got < count:
        got += sum(1 for m in consumer.consume(10_000, 0.1) if m.error() is None)
    elapsed = time.perf_counter() - started
    threads_after, gateway_after = thread_runtimes(client), thread_runtimes(gateway)
    seen = len(statistics_seen)
    deadline = time.monotonic() + 3
    while len(statistics_seen) == seen and time.monotonic() < deadline:
        consumer.poll(0.1)
    consumer.close()
    used = seconds_by_thread(threads_before, threads_after)
    main = used.pop(main_thread, 0.0)
    brokers = json.loads(statistics_seen[-1])["brokers"].values() if statistics_seen else []
    requests = sum(broker["req"].get("Fetch", 0) for broker in brokers)
    received = sum(broker["rxbytes"] for broker in brokers)
    return {
        "kafka_fetch_msgs": count / elapsed,
        "kafka_fetch_client_main_us": main / count * 1e6,
        "kafka_fetch_client_librdkafka_us": sum(used.values()) / count * 1e6,
        "kafka_fetch_gateway_us": cpu_seconds_between(gateway_before, gateway_after) / count * 1e6,
        "kafka_fetch_requests": requests,
        "kafka_fetch_response_kib": received / max(requests, 1) / 1024,
    }


def warm_fetch(bootstrap: str, topic: str) -> None:
    """One message read by a librdkafka consumer: what a gateway does once in its life (loading the
    protocol schemas of the client's Fetch version, opening the topic's reader) is not timed."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "warm", "enable.auto.commit": False})
    consumer.assign([TopicPartition(topic, 0, 0)])
    while not [m for m in consumer.consume(1, 1.0) if m.error() is None]:
        pass
    consumer.close()


def kcat_fetch(bootstrap: str, topic: str, count: int, gateway: psutil.Process) -> dict[str, float]:
    """The same read by kcat (librdkafka in C, no Python: what the gateway serves a client whose own
    cost per message is small), to the ``count``-th message: messages per second from its start
    (connection and metadata included) and the CPU per message of kcat and of the gateway."""
    command = ["kcat", "-C", "-b", bootstrap, "-t", topic, "-p", "0", "-o", "beginning", "-c", str(count), "-q"]
    gateway_before = thread_runtimes(gateway)
    started = time.perf_counter()
    kcat = subprocess.Popen([*command, "-f", ""], stdout=subprocess.DEVNULL)
    _, status, usage = os.wait4(kcat.pid, 0)
    elapsed = time.perf_counter() - started
    gateway_after = thread_runtimes(gateway)
    if status != 0:
        raise RuntimeError(f"kcat failed (wait status {status})")
    return {
        "kcat_fetch_msgs": count / elapsed,
        "kcat_fetch_client_us": (usage.ru_utime + usage.ru_stime) / count * 1e6,
        "kcat_fetch_gateway_us": cpu_seconds_between(gateway_before, gateway_after) / count * 1e6,
    }


def native_produce(path: str, count: int) -> float:
    """Messages per second of ``push_many`` in batches of 1,000, same messages."""

    async def run() -> float:
        async with adiskq.Producer(path) as producer:
            started = time.perf_counter()
            for first in range(0, count, 1000):
                await producer.push_many(
                    [adiskq.Record(VALUE, key=b"key-%d" % i) for i in range(first, min(count, first + 1000))]
                )
            return count / (time.perf_counter() - started)

    return anyio.run(run)


def native_fetch(path: str, count: int) -> float:
    """Messages per second of a library Consumer's ``batches()`` from offset 0."""

    async def run() -> float:
        got = 0
        async with adiskq.Consumer(path, 0, end="close") as consumer:
            started = time.perf_counter()
            async for batch in consumer.batches(1000):
                got += len(batch)
            assert got >= count
            return got / (time.perf_counter() - started)

    return anyio.run(run)


def kafka_latency(bootstrap: str, topic: str, seconds: float) -> list[float]:
    """Microseconds from produce() to the consumer holding the message, one every 0.5 ms."""
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 0, "acks": 1})
    producer.list_topics(topic, timeout=10)
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": "latency",
            "fetch.wait.max.ms": 100,
            "fetch.error.backoff.ms": 0,
            "enable.auto.commit": False,  # nothing to commit: close() would look for a coordinator
        }
    )
    high = consumer.get_watermark_offsets(TopicPartition(topic, 0), timeout=10)[1]
    consumer.assign([TopicPartition(topic, 0, high)])
    # One message through before the clock starts: the consumer has found the partition's leader and
    # its offset, and its next Fetch waits in the broker (Apache Kafka takes seconds to get there on
    # a busy machine, which would otherwise be counted in every early sample).
    producer.produce(topic, VALUE, b"warm-up", partition=0)
    producer.flush(10)
    deadline = time.monotonic() + 60
    while (message := consumer.poll(0.1)) is None or message.error() is not None or message.key() != b"warm-up":
        if time.monotonic() > deadline:
            raise RuntimeError(f"the latency consumer read nothing of {topic} in 60 s")
    samples: list[float] = []
    sent: dict[bytes, float] = {}
    interval = 0.0005
    deadline = time.perf_counter() + seconds
    next_send = time.perf_counter()
    i = 0
    while time.perf_counter() < deadline:
        now = time.perf_counter()
        if now >= next_send:
            key = b"%d" % i
            sent[key] = time.perf_counter()
            producer.produce(topic, VALUE, key, partition=0)
            producer.poll(0)
            i += 1
            next_send += interval
        message = consumer.poll(0)
        if message is not None and message.error() is None:
            samples.append((time.perf_counter() - sent.pop(message.key())) * 1e6)
    producer.flush(10)
    end = time.perf_counter() + min(5.0, 4 * seconds)
    while sent and time.perf_counter() < end:
        message = consumer.poll(0.1)
        if message is not None and message.error() is None:
            samples.append((time.perf_counter() - sent.pop(message.key())) * 1e6)
    consumer.close()
    return samples


def native_latency(path: str, seconds: float) -> list[float]:
    """Microseconds from push to a library consumer (same loop) holding the message, one every 0.5 ms."""

    async def run() -> list[float]:
        samples: list[float] = []
        async with adiskq.Producer(path) as producer:
            next_offset = adiskq.stats(path).partitions[0].next_offset
            async with adiskq.Consumer(path, 0, start=next_offset) as consumer, anyio.create_task_group() as tg:
                sent: dict[int, float] = {}

                async def read() -> None:
                    async for message in consumer:
                        samples.append((time.perf_counter() - sent.pop(message.offset)) * 1e6)
                        if not sent and done:
                            tg.cancel_scope.cancel()

                done = False
                tg.start_soon(read)
                deadline = time.perf_counter() + seconds
                while time.perf_counter() < deadline:
                    stamp = time.perf_counter()
                    offset = next_offset
                    sent[offset] = stamp
                    receipt = await producer.push(VALUE, key="k")
                    assert receipt.offset == offset
                    next_offset += 1
                    await anyio.sleep(0.0005)
                done = True
                await anyio.sleep(0.2)
                tg.cancel_scope.cancel()
        return samples

    return anyio.run(run)


class RequestCounts:
    """The requests a librdkafka client has sent, by type, from its statistics (``stats_cb``)."""

    def __init__(self) -> None:
        self.latest: dict[str, int] = {}
        self.emitted = 0  # statistics received so far

    def config(self) -> dict[str, Any]:
        return {"statistics.interval.ms": 50, "stats_cb": self._received}

    def _received(self, text: str) -> None:
        counts: dict[str, int] = {}
        for broker in json.loads(text)["brokers"].values():
            for name, count in broker.get("req", {}).items():
                counts[name] = counts.get(name, 0) + count
        self.latest = counts
        self.emitted += 1

    def fresh(self, poll: Any) -> dict[str, int]:
        """The counts of a report made after this call (``poll`` serves the client's callbacks)."""
        seen = self.emitted
        deadline = time.monotonic() + 10
        while self.emitted < seen + 2 and time.monotonic() < deadline:  # the next report may be under way
            poll(0.01)
        return dict(self.latest)


def gateway_cpu_per_round_trip(
    bootstrap: str, topic: str, pid: int, trips: int, *, one_batch: bool = True
) -> tuple[float, dict[str, float]]:
    """Gateway CPU microseconds per round trip of 10 messages, and the requests a trip took, by type.

    A trip: a librdkafka producer (acks=1) produces 10 messages of 100 bytes and flush()es; a
    librdkafka consumer (assigned, ``fetch.wait.max.ms`` 100) consumes those 10. With ``one_batch``
    (the requirement's "round trip of a small batch") the producer's ``linger.ms`` is longer than a
    trip, so the 10 messages wait in its queue until flush() sends them as one Produce; the
    consumer's Fetch, sent when it read the last trip's messages, waits in the gateway's long poll
    and is answered when that Produce lands: 2.0 requests a trip (a Produce, a Fetch), counted.
    Without it (``linger.ms`` 0), each produce() call may go out as a Produce of its own while the
    last is in flight, and the consumer fetches whatever has arrived: 2.1-4.7 requests a trip,
    more the less busy the machine (librdkafka's thread then sends sooner), and the CPU with them.
    Every request either client sends during the trips is counted (from librdkafka's statistics),
    whatever its type, and the gateway's CPU is its process's (user + system) over all of them.
    """
    counts = RequestCounts(), RequestCounts()
    producer = Producer(
        {"bootstrap.servers": bootstrap, "linger.ms": 60_000 if one_batch else 0, "acks": 1, **counts[0].config()}
    )
    producer.list_topics(topic, timeout=10)
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": "trips",
            "fetch.wait.max.ms": 100,
            "enable.auto.commit": False,
            **counts[1].config(),
        }
    )
    high = consumer.get_watermark_offsets(TopicPartition(topic, 0), timeout=10)[1]
    consumer.assign([TopicPartition(topic, 0, high)])

    def trip(number: int) -> None:
        for i in range(10):
            producer.produce(topic, VALUE, b"%d-%d" % (number, i), partition=0)
        producer.flush(10)
        got = 0
        while got < 10:
            got += sum(1 for m in consumer.consume(10, 1.0) if m.error() is None)

    for number in range(10):  # connections made, the consumer's first Fetch in the long poll
        trip(number)
    sent_before = counts[0].fresh(producer.poll), counts[1].fresh(consumer.poll)
    gateway = psutil.Process(pid)  # the broker's process: the gateway's, or Apache Kafka's JVM
    before = thread_runtimes(gateway)
    for number in range(trips):
        trip(number)
    after = thread_runtimes(gateway)
    sent_after = counts[0].fresh(producer.poll), counts[1].fresh(consumer.poll)
    consumer.close()
    used = cpu_seconds_between(before, after)
    requests: dict[str, float] = {}
    for old, new in zip(sent_before, sent_after, strict=True):
        for name, count in new.items():
            if count > old.get(name, 0):
                requests[name] = requests.get(name, 0) + (count - old.get(name, 0)) / trips
    return used / trips * 1e6, requests


def protocol_layer() -> dict[str, float]:
    """Microseconds kio and the batch codec take for a Produce of 1,000 records and its Fetch answer."""
    import datetime as dt

    from kio.schema.produce.v9.request import PartitionProduceData, ProduceRequest, TopicProduceData
    from kio.schema.types import TopicName
    from kio.serial import entity_writer

    from adiskq.kafka._registry import respond
    from adiskq.kafka.wire.batch import KafkaRecord, decode_batches, encode_batch
    from adiskq.kafka.wire.protocol import decode_request, encode_response, parse_header

    records = [KafkaRecord(i, 1_700_000_000_000, b"key-%d" % i, VALUE, []) for i in range(1000)]
    batch = encode_batch(base_offset=0, records=records, base_timestamp_ms=1_700_000_000_000)
    request = ProduceRequest(
        acks=1,
        timeout=dt.timedelta(seconds=5),
        topic_data=(
            TopicProduceData(name=TopicName("t"), partition_data=(PartitionProduceData(index=0, records=batch),)),
        ),
    )
    body = io.BytesIO()
    entity_writer(ProduceRequest)(body, request)
    message = b"\x00\x00\x00\x09\x00\x00\x00\x01\xff\xff\x00" + body.getvalue()

    def timed(function: Any, repeat: int = 200) -> float:
        started = time.perf_counter()
        for _ in range(repeat):
            function()
        return (time.perf_counter() - started) / repeat * 1e6

    header, at = parse_header(message)
    from kio.schema.fetch.v12.request import FetchRequest

    fetch_request = FetchRequest(max_wait=dt.timedelta(0), min_bytes=1, topics=(), forgotten_topics_data=())

    def fetch_answer() -> bytes:
        from kio.schema.errors import ErrorCode

        from adiskq.kafka._registry import nested

        part = nested(
            fetch_request,
            "PartitionData",
            partition_index=0,
            error_code=ErrorCode.none,
            high_watermark=1000,
            last_stable_offset=1000,
            log_start_offset=0,
            aborted_transactions=None,
            preferred_read_replica=-1,
            records=batch,
        )
        topic = nested(fetch_request, "FetchableTopicResponse", topic="t", partitions=(part,))
        response = respond(
            fetch_request,
            "FetchResponse",
            throttle_time=dt.timedelta(0),
            error_code=ErrorCode.none,
            session_id=0,
            responses=(topic,),
        )
        return encode_response(1, response)

    def fetch_answer_by_hand() -> bytes:
        from adiskq.kafka.wire.fast_responses import FetchedPartition, fetch_response
        from adiskq.kafka.wire.protocol import frame_payload

        payload = fetch_response(12, [("t", [FetchedPartition(0, 0, 1000, 0, batch)])])
        return frame_payload(1, 1, 12, payload)

    assert fetch_answer_by_hand() == fetch_answer()
    return {
        "kio_produce_decode_us": timed(lambda: decode_request(header, message, at)),
        "kio_fetch_encode_us": timed(fetch_answer),
        "fetch_encode_us": timed(fetch_answer_by_hand),
        "batch_decode_us": timed(lambda: decode_batches(batch), 20),
        "batch_encode_us": timed(lambda: encode_batch(base_offset=0, records=records, base_timestamp_ms=1), 20),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="tiny counts: checks that everything works")
    parser.add_argument("--out", default=None, help="write the figures as kafka.json here")
    parser.add_argument(
        "--only",
        choices=["fetch", "produce", "transactions"],
        help="fetch (or produce) alone: the gateway's and the library's; transactions: the gateway's and Kafka's",
    )
    parser.add_argument(
        "--before",
        metavar="FOLDER",
        help="with --only transactions: also measure a gateway running the adiskq package in FOLDER "
        "(e.g. an earlier commit's adiskq/, with its compiled core), in the same run",
    )
    args = parser.parse_args(argv)
    count = 2_000 if args.quick else 200_000
    if args.only == "fetch":
        return fetch_only(count, args.out)
    if args.only == "produce":
        return produce_only(count, args.out)
    if args.only == "transactions":
        return transactions_only(20 if args.quick else 500, args.out, args.before)
    seconds = 0.25 if args.quick else 5.0
    # The kernel counts CPU time in 10 ms ticks: quick mode still makes enough trips to pass a few.
    trips = 40 if args.quick else 500
    root = tempfile.mkdtemp(prefix="adiskq-bench-kafka-")
    process, port = start_gateway(root)
    bootstrap = f"127.0.0.1:{port}"
    gateway = psutil.Process(process.pid)
    results: dict[str, float] = {}
    try:
        print(f"{time.strftime('%H:%M:%S')} measuring kafka_produce_msgs ...", file=sys.stderr, flush=True)
        results["kafka_produce_msgs"] = kafka_produce(bootstrap, "bench", count)
        print(f"{time.strftime('%H:%M:%S')} measuring kafka_fetch_msgs ...", file=sys.stderr, flush=True)
        warm_fetch(bootstrap, "bench")
        results.update(kafka_fetch(bootstrap, "bench", count, gateway, THROUGHPUT_SETTINGS))
        results["kafka_fetch_default_msgs"] = kafka_fetch(bootstrap, "bench", count, gateway)["kafka_fetch_msgs"]
        print(f"{time.strftime('%H:%M:%S')} measuring kcat_fetch_msgs ...", file=sys.stderr, flush=True)
        results.update(kcat_fetch(bootstrap, "bench", count, gateway))
        print(f"{time.strftime('%H:%M:%S')} measuring latency = kafka_latency ...", file=sys.stderr, flush=True)
        latency = kafka_latency(bootstrap, "latency", seconds)
        results["kafka_e2e_p50_us"] = statistics.median(latency)
        results["kafka_e2e_p99_us"] = statistics.quantiles(latency, n=100)[98]
        print(f"{time.strftime('%H:%M:%S')} measuring gateway_cpu_per_round_trip_us ...", file=sys.stderr, flush=True)
        cpu, requests = gateway_cpu_per_round_trip(bootstrap, "trips", process.pid, trips)
        results["gateway_cpu_per_round_trip_us"] = cpu
        results["round_trip_requests"] = sum(requests.values())
        results.update({f"round_trip_requests_{name}": count for name, count in requests.items()})
        cpu, requests = gateway_cpu_per_round_trip(bootstrap, "trips-unbatched", process.pid, trips, one_batch=False)
        results["gateway_peak_rss_mib"] = peak_rss_mib(process.pid)
        results["gateway_cpu_per_unbatched_trip_us"] = cpu
        results["unbatched_trip_requests"] = sum(requests.values())
    finally:
        stop_gateway(process)
    results.update(apache_kafka(count, seconds, trips))
    native_root = tempfile.mkdtemp(prefix="adiskq-bench-native-")
    try:
        path = os.path.join(native_root, "bench")
        print(f"{time.strftime('%H:%M:%S')} measuring native_produce_msgs ...", file=sys.stderr, flush=True)
        results["native_produce_msgs"] = native_produce(path, count)
        print(f"{time.strftime('%H:%M:%S')} measuring native_fetch_msgs ...", file=sys.stderr, flush=True)
        results["native_fetch_msgs"] = native_fetch(path, count)
        print(f"{time.strftime('%H:%M:%S')} measuring latency = native_latency ...", file=sys.stderr, flush=True)
        latency = native_latency(os.path.join(native_root, "latency"), seconds)
        results["native_e2e_p50_us"] = statistics.median(latency)
        results["native_e2e_p99_us"] = statistics.quantiles(latency, n=100)[98]
    finally:
        shutil.rmtree(native_root)
        shutil.rmtree(root)
    results.update(protocol_layer())
    rows = [
        ("produce (msg/s)", "kafka_produce_msgs", "native_produce_msgs", "≥ 400,000"),
        ("fetch (msg/s)", "kafka_fetch_msgs", "native_fetch_msgs", "≥ 1,000,000"),
        ("end to end p50 at 2,000 msg/s (µs)", "kafka_e2e_p50_us", "native_e2e_p50_us", "≤ 1,000"),
        ("end to end p99 at 2,000 msg/s (µs)", "kafka_e2e_p99_us", "native_e2e_p99_us", "≤ 5,000"),
    ]
    print(f"{'':38} {'Kafka gateway':>14} {'library':>12} {'ratio':>7}  target (gateway)")
    for label, kafka, native, target in rows:
        ratio = results[kafka] / results[native]
        print(f"{label:38} {results[kafka]:>14,.0f} {results[native]:>12,.0f} {ratio:>6.2f}x  {target}")
    by_type = ", ".join(
        f"{name[len('round_trip_requests_') :]} {count:.2f}"
        for name, count in sorted(results.items())
        if name.startswith("round_trip_requests_")
    )
    print(
        f"{'gateway CPU per round trip of a 10-message batch (µs)':52} {results['gateway_cpu_per_round_trip_us']:>12,.0f}"
        f"  ≤ 100  ({results['round_trip_requests']:.2f} requests a trip: {by_type})"
    )
    print(
        f"{'  the same 10 messages produced with linger.ms=0 (µs)':52} "
        f"{results['gateway_cpu_per_unbatched_trip_us']:>12,.0f}  ({results['unbatched_trip_requests']:.2f} requests a trip)"
    )
    _print_fetch_context(results, count)
    _print_beside_apache_kafka(results)
    print(
        "protocol layer, 1,000-record batch (µs): kio Produce decode "
        f"{results['kio_produce_decode_us']:.0f}, Fetch encode {results['fetch_encode_us']:.0f} "
        f"(through kio {results['kio_fetch_encode_us']:.0f}); "
        f"batch codec decode {results['batch_decode_us']:.0f}, encode {results['batch_encode_us']:.0f}"
    )
    if args.out:
        with open(os.path.join(args.out, "kafka.json"), "w") as file:
            json.dump(results, file, indent=2)
    return 0


def peak_rss_mib(pid: int) -> float:
    """The process's peak resident memory (VmHWM), in MiB."""
    with open(f"/proc/{pid}/status") as status:
        for line in status:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    raise RuntimeError(f"no VmHWM in /proc/{pid}/status")


def make_topic(bootstrap: str, topic: str) -> None:
    """Create a topic of one partition and wait until its partition is served: Kafka answers
    CreateTopics (and a producer's Metadata that creates a topic) a moment before its broker serves
    the new partition, and the workloads' first ListOffsets would fail. Each try is a request."""
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, 1, 1)])[topic].result(30)
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "bench-setup", "enable.auto.commit": False})
    deadline = time.monotonic() + 30
    try:
        while True:
            try:
                consumer.get_watermark_offsets(TopicPartition(topic, 0), timeout=10)
                return
            except KafkaException:
                if time.monotonic() > deadline:
                    raise
    finally:
        consumer.close()


def on_apache_kafka(work: Callable[[str, psutil.Process], dict[str, float]]) -> dict[str, float]:
    """``work(bootstrap, jvm)`` against one Apache Kafka node (4.4, KRaft, ``-Xmx512m``) on this
    machine: its figures.

    The node is the test suite's own (``tests/support/kafka_broker.py``, from the jars
    ``scripts/fetch_kafka_jars.py`` fetches): inside a test run (the suite's quick run of this
    benchmark), the run's shared node; else one started for this run and stopped after it."""
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(HERE)), "tests"))
    from support import kafka_broker as kafka_broker_support

    inside_a_test_run = kafka_broker_support.RUN_VARIABLE in os.environ
    if not inside_a_test_run:
        kafka_broker_support.claim_run_folder()
    try:
        print(f"{time.strftime('%H:%M:%S')} starting Apache Kafka ...", file=sys.stderr, flush=True)
        broker = kafka_broker_support.shared_broker()
        return work(broker.bootstrap, psutil.Process(broker.pid))
    finally:
        if not inside_a_test_run:
            kafka_broker_support.release_run_folder()


def apache_kafka(count: int, seconds: float, trips: int) -> dict[str, float]:
    """The gateway's workloads, with the same client and settings, against one Apache Kafka node
    (``on_apache_kafka``): the figures, and the JVM's CPU and peak memory."""

    def work(bootstrap: str, jvm: psutil.Process) -> dict[str, float]:
        run = f"{os.getpid()}-{time.monotonic_ns()}"  # the suite's node outlives this run: topics of its own
        for name in ("bench", "latency", "trips"):
            make_topic(bootstrap, f"{name}-{run}")
        results: dict[str, float] = {}
        print(f"{time.strftime('%H:%M:%S')} measuring apache_kafka_produce_msgs ...", file=sys.stderr, flush=True)
        results["apache_kafka_produce_msgs"] = kafka_produce(bootstrap, f"bench-{run}", count)
        print(f"{time.strftime('%H:%M:%S')} measuring apache_kafka_fetch_msgs ...", file=sys.stderr, flush=True)
        warm_fetch(bootstrap, f"bench-{run}")
        fetched = kafka_fetch(bootstrap, f"bench-{run}", count, jvm, THROUGHPUT_SETTINGS)
        results["apache_kafka_fetch_msgs"] = fetched["kafka_fetch_msgs"]
        results["apache_kafka_fetch_broker_us"] = fetched["kafka_fetch_gateway_us"]
        print(f"{time.strftime('%H:%M:%S')} measuring apache_kafka latency ...", file=sys.stderr, flush=True)
        latency = kafka_latency(bootstrap, f"latency-{run}", seconds)
        results["apache_kafka_e2e_p50_us"] = statistics.median(latency)
        results["apache_kafka_e2e_p99_us"] = statistics.quantiles(latency, n=100)[98]
        print(
            f"{time.strftime('%H:%M:%S')} measuring apache_kafka_cpu_per_round_trip_us ...", file=sys.stderr, flush=True
        )
        cpu, _ = gateway_cpu_per_round_trip(bootstrap, f"trips-{run}", jvm.pid, trips)
        results["apache_kafka_cpu_per_round_trip_us"] = cpu
        results["apache_kafka_peak_rss_mib"] = peak_rss_mib(jvm.pid)
        return results

    return on_apache_kafka(work)


def _print_beside_apache_kafka(results: dict[str, float]) -> None:
    """The gateway beside one Apache Kafka node, same client, same settings, same machine: the
    ratio is the gateway's figure over Kafka's (above 1 is the gateway ahead for throughput,
    behind for latency, CPU and memory)."""
    rows = [
        ("produce (msg/s, linger.ms=5)", "kafka_produce_msgs", "apache_kafka_produce_msgs", "≥ 1 (at or above Kafka)"),
        ("fetch (msg/s)", "kafka_fetch_msgs", "apache_kafka_fetch_msgs", "≥ 1"),
        ("end to end p50 at 2,000 msg/s (µs)", "kafka_e2e_p50_us", "apache_kafka_e2e_p50_us", "≤ 1"),
        ("end to end p99 at 2,000 msg/s (µs)", "kafka_e2e_p99_us", "apache_kafka_e2e_p99_us", "≤ 1"),
        ("broker CPU per round trip (µs)", "gateway_cpu_per_round_trip_us", "apache_kafka_cpu_per_round_trip_us", ""),
        ("broker CPU a fetched message (µs)", "kafka_fetch_gateway_us", "apache_kafka_fetch_broker_us", ""),
        ("broker peak memory (MiB, VmHWM)", "gateway_peak_rss_mib", "apache_kafka_peak_rss_mib", "< 1"),
    ]
    print(f"{'':38} {'Kafka gateway':>14} {'Apache Kafka':>13} {'ratio':>7}  target (ratio)")
    for label, gateway, kafka, target in rows:
        ratio = results[gateway] / results[kafka]
        print(f"{label:38} {results[gateway]:>14,.1f} {results[kafka]:>13,.1f} {ratio:>6.2f}x  {target}")


def _print_fetch_context(results: dict[str, float], count: int) -> None:
    """Where the fetch's CPU went (its target counts a Python client's and the gateway's together),
    and kcat's read of the same messages: the gateway serving a client without Python's cost."""
    print(
        f"fetch with librdkafka's default queue settings: {results['kafka_fetch_default_msgs']:,.0f} msg/s "
        "(the table's consumer sets queued.min.messages=1000000, fetch.queue.backoff.ms=10)"
    )
    print(
        f"fetch, CPU a message (µs): confluent-kafka client {results['kafka_fetch_client_main_us']:.2f} in its "
        f"main thread (Message objects) + {results['kafka_fetch_client_librdkafka_us']:.2f} in librdkafka's threads, "
        f"gateway {results['kafka_fetch_gateway_us']:.2f}; {results['kafka_fetch_requests']:.0f} Fetch requests "
        f"for {count:,} messages, ~{results['kafka_fetch_response_kib']:,.0f} KiB received a request"
    )
    print(
        f"fetch by kcat (librdkafka in C, from its start): {results['kcat_fetch_msgs']:,.0f} msg/s, CPU a message "
        f"(µs): kcat {results['kcat_fetch_client_us']:.2f}, gateway {results['kcat_fetch_gateway_us']:.2f}"
    )


def fetch_only(count: int, out: str | None) -> int:
    """``--only fetch``: the gateway's fetch figures (its messages produced through it first), and
    the library's ``batches()`` read of as many messages beside them."""
    root = tempfile.mkdtemp(prefix="adiskq-bench-kafka-")
    process, port = start_gateway(root)
    bootstrap = f"127.0.0.1:{port}"
    gateway = psutil.Process(process.pid)
    try:
        kafka_produce(bootstrap, "bench", count)
        print(f"{time.strftime('%H:%M:%S')} measuring kafka_fetch_msgs ...", file=sys.stderr, flush=True)
        warm_fetch(bootstrap, "bench")
        results = kafka_fetch(bootstrap, "bench", count, gateway, THROUGHPUT_SETTINGS)
        results["kafka_fetch_default_msgs"] = kafka_fetch(bootstrap, "bench", count, gateway)["kafka_fetch_msgs"]
        print(f"{time.strftime('%H:%M:%S')} measuring kcat_fetch_msgs ...", file=sys.stderr, flush=True)
        results.update(kcat_fetch(bootstrap, "bench", count, gateway))
    finally:
        stop_gateway(process)
        shutil.rmtree(root)
    native_root = tempfile.mkdtemp(prefix="adiskq-bench-native-")
    try:
        path = os.path.join(native_root, "bench")
        native_produce(path, count)
        print(f"{time.strftime('%H:%M:%S')} measuring native_fetch_msgs ...", file=sys.stderr, flush=True)
        results["native_fetch_msgs"] = native_fetch(path, count)
    finally:
        shutil.rmtree(native_root)
    ratio = results["kafka_fetch_msgs"] / results["native_fetch_msgs"]
    print(f"{'':38} {'Kafka gateway':>14} {'library':>12} {'ratio':>7}  target (gateway)")
    print(
        f"{'fetch (msg/s)':38} {results['kafka_fetch_msgs']:>14,.0f} {results['native_fetch_msgs']:>12,.0f} "
        f"{ratio:>6.2f}x  ≥ 1,000,000"
    )
    _print_fetch_context(results, count)
    if out:
        with open(os.path.join(out, "kafka.json"), "w") as file:
            json.dump(results, file, indent=2)
    return 0


def produce_only(count: int, out: str | None) -> int:
    """``--only produce``: the gateway's produce figure, its CPU a message (user and system time of
    the ``adiskq serve`` process over the produce), and the library's ``push_many`` beside them."""
    root = tempfile.mkdtemp(prefix="adiskq-bench-kafka-")
    process, port = start_gateway(root)
    gateway = psutil.Process(process.pid)
    try:
        print(f"{time.strftime('%H:%M:%S')} measuring kafka_produce_msgs ...", file=sys.stderr, flush=True)
        before = thread_runtimes(gateway)
        results = {"kafka_produce_msgs": kafka_produce(f"127.0.0.1:{port}", "bench", count)}
        results["kafka_produce_gateway_us"] = cpu_seconds_between(before, thread_runtimes(gateway)) / count * 1e6
    finally:
        stop_gateway(process)
        shutil.rmtree(root)
    native_root = tempfile.mkdtemp(prefix="adiskq-bench-native-")
    try:
        results["native_produce_msgs"] = native_produce(os.path.join(native_root, "bench"), count)
    finally:
        shutil.rmtree(native_root)
    ratio = results["kafka_produce_msgs"] / results["native_produce_msgs"]
    print(f"{'':38} {'Kafka gateway':>14} {'library':>12} {'ratio':>7}  target (gateway)")
    print(
        f"{'produce (msg/s, linger.ms=5)':38} {results['kafka_produce_msgs']:>14,.0f} "
        f"{results['native_produce_msgs']:>12,.0f} {ratio:>6.2f}x  ≥ 400,000"
    )
    print(f"{'gateway CPU a message (µs)':38} {results['kafka_produce_gateway_us']:>14.2f}")
    if out:
        with open(os.path.join(out, "kafka.json"), "w") as file:
            json.dump(results, file, indent=2)
    return 0


def transactions_only(count: int, out: str | None, before: str | None = None) -> int:
    """``--only transactions``: transactions of 100 records (kafka_transactions_workload.py) against
    the gateway and Apache Kafka in the same run (and a gateway of the adiskq in ``before``)."""
    root = tempfile.mkdtemp(prefix="adiskq-bench-kafka-")

    def starter(adiskq_from: str | None) -> kafka_transactions_workload.GatewayStarter:
        def gateway() -> tuple[str, psutil.Process, Callable[[], None]]:
            folder = tempfile.mkdtemp(dir=root)
            process, port = start_gateway(folder, adiskq_from)
            return f"127.0.0.1:{port}", psutil.Process(process.pid), lambda: stop_gateway(process)

        return gateway

    try:
        results = kafka_transactions_workload.measure(
            starter(None), on_apache_kafka, count, before=None if before is None else starter(before)
        )
    finally:
        shutil.rmtree(root)
    kafka_transactions_workload.print_beside(results)
    if out:
        with open(os.path.join(out, "kafka.json"), "w") as file:
            json.dump(results, file, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
