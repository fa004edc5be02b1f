"""The mirror's throughput, local → Kafka and back, beside the cluster's own producer in the same run.

    python benchmarks/kafka/bench_mirror.py --bootstrap 127.0.0.1:9092 --replication-factor 3
    python benchmarks/kafka/bench_mirror.py --bootstrap 127.0.0.1:9092 --producer-perf CLASSPATH

N messages (100-byte values, distinct keys) in a stream of 3 partitions. Figures, messages a second:

- the cluster's own producer: librdkafka (confluent-kafka) with ``enable.idempotence``, ``acks=all``,
  ``linger.ms=5``, to a new topic of 3 partitions; with ``--producer-perf``, also Kafka's own
  ``ProducerPerformance`` (the Java client; ``kafka-producer-perf-test``) with ``acks=all``, given
  the class path of ``org.apache.kafka:kafka-tools`` and its dependencies;
- ``Mirror`` local → Kafka (``once=True``): from the stream to a new topic, each batch of 10,000 one
  transaction, timed from ``run()`` to its end (the open — connecting, ``init_transactions()``, reading
  the positions — is given apart);
- ``Mirror`` Kafka → local: that topic into a new stream, timed the same way.
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import tempfile
import time
import uuid

import anyio
import confluent_kafka
from confluent_kafka.admin import AdminClient
from confluent_kafka.cimpl import NewTopic

import adiskq
from adiskq.kafka import Mirror

VALUE = b"v" * 100
PARTITIONS = 3


def _new_topic(bootstrap: str, replication_factor: int) -> str:
    name = f"bench-{uuid.uuid4().hex[:12]}"
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(name, PARTITIONS, replication_factor)])[name].result(60)
    return name


def cluster_producer(bootstrap: str, messages: int, replication_factor: int) -> float:
    topic = _new_topic(bootstrap, replication_factor)
    producer = confluent_kafka.Producer(
        {"bootstrap.servers": bootstrap, "enable.idempotence": True, "acks": "all", "linger.ms": 5}
    )
    started = time.perf_counter()
    for i in range(messages):
        while True:
            try:
                producer.produce(topic, VALUE, b"key-%d" % i)
                break
            except BufferError:
                producer.poll(0.05)
    assert producer.flush(120) == 0
    return messages / (time.perf_counter() - started)


def java_producer(bootstrap: str, messages: int, replication_factor: int, class_path: str) -> float:
    topic = _new_topic(bootstrap, replication_factor)
    done = subprocess.run(
        [
            "java",
            "-Xmx512m",
            "-cp",
            class_path,
            "org.apache.kafka.tools.ProducerPerformance",
            "--topic",
            topic,
            "--num-records",
            str(messages),
            "--record-size",
            str(len(VALUE)),
            "--throughput",
            "-1",
            "--producer-props",
            f"bootstrap.servers={bootstrap}",
            "acks=all",
            "linger.ms=5",
        ],
        capture_output=True,
        text=True,
        check=True,
        timeout=600,
    )
    found = re.findall(r"([0-9.]+) records/sec", done.stdout)
    return float(found[-1])


async def mirror_both_ways(bootstrap: str, messages: int, replication_factor: int) -> dict[str, float]:
    with tempfile.TemporaryDirectory() as folder:
        stream = os.path.join(folder, "orders")
        async with adiskq.Producer(stream, partitions=PARTITIONS) as producer:
            for first in range(0, messages, 10_000):
                await producer.push_many(
                    [adiskq.Record(VALUE, key=b"key-%d" % i) for i in range(first, min(first + 10_000, messages))]
                )
        topic = f"bench-{uuid.uuid4().hex[:12]}"
        url = f"kafka://{bootstrap}/{topic}"
        figures: dict[str, float] = {}
        opened = time.perf_counter()
        async with Mirror(stream, url, create_topic=True, replication_factor=replication_factor, once=True) as mirror:
            started = time.perf_counter()
            await mirror.run()
            ended = time.perf_counter()
        figures["mirror local -> Kafka"] = messages / (ended - started)
        figures["  (its open, s)"] = started - opened
        opened = time.perf_counter()
        async with Mirror(url, os.path.join(folder, "back"), once=True) as back:
            started = time.perf_counter()
            await back.run()
            ended = time.perf_counter()
        assert back.status.shipped == messages, back.status
        figures["mirror Kafka -> local"] = messages / (ended - started)
        figures["  (its open, s) "] = started - opened
        return figures


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--bootstrap", required=True)
    parser.add_argument("--messages", type=int, default=200_000)
    parser.add_argument("--replication-factor", type=int, default=1)
    parser.add_argument("--producer-perf", metavar="CLASSPATH", help="kafka-tools' class path, for ProducerPerformance")
    parser.add_argument("--backend", choices=["asyncio", "trio"], default="trio")
    args = parser.parse_args()
    figures = {
        "cluster producer (librdkafka, idempotent, acks=all)": cluster_producer(
            args.bootstrap, args.messages, args.replication_factor
        )
    }
    if args.producer_perf:
        figures["cluster producer (Java ProducerPerformance, acks=all)"] = java_producer(
            args.bootstrap, args.messages, args.replication_factor, args.producer_perf
        )
    figures.update(
        anyio.run(mirror_both_ways, args.bootstrap, args.messages, args.replication_factor, backend=args.backend)
    )
    print(
        f"{args.messages:,} messages of {len(VALUE)} bytes, {PARTITIONS} partitions, replication factor {args.replication_factor}"
    )
    for name, figure in figures.items():
        unit = "" if "(its open" in name else " messages/s"
        print(f"{name:58} {figure:12,.2f}{unit}" if unit == "" else f"{name:58} {figure:12,.0f}{unit}")


if __name__ == "__main__":
    main()
