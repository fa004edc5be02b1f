"""Which Kafka client the mirror drives: transactional produce through each, against a real broker.

    python benchmarks/kafka/bench_mirror_client.py --bootstrap 127.0.0.1:9092
    python benchmarks/kafka/bench_mirror_client.py --bootstrap 127.0.0.1:9092 --messages 20000

N messages of 100 bytes with distinct keys, in transactions of ``--batch`` messages each (the
mirror's shape: a batch, then its commit), to a new topic of one partition. Figures, messages a second:

- confluent-kafka (librdkafka), each transaction's produce calls and commit made in an AnyIO worker
  thread, under Trio and under asyncio: the way the mirror uses it;
- aiokafka's transactional producer (``producer.transaction()``) on asyncio, the only loop it runs on;
- confluent-kafka without transactions (acks=all, idempotent): the broker's own rate for the shape.
"""

from __future__ import annotations

import argparse
import asyncio
import time
import uuid

import anyio
import anyio.to_thread
import confluent_kafka
from confluent_kafka.admin import AdminClient, NewTopic

VALUE = b"v" * 100


def _new_topic(bootstrap: str) -> str:
    name = f"bench-{uuid.uuid4().hex[:12]}"
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for future in admin.create_topics([NewTopic(name, 1, 1)]).values():
        future.result()
    return name


def _confluent_transactions(bootstrap: str, messages: int, batch: int) -> float:
    topic = _new_topic(bootstrap)
    producer = confluent_kafka.Producer(
        {"bootstrap.servers": bootstrap, "transactional.id": f"bench-{uuid.uuid4().hex}", "linger.ms": 5}
    )
    producer.init_transactions(30)

    def one_transaction(first: int) -> None:
        producer.begin_transaction()
        for i in range(first, min(first + batch, messages)):
            while True:
                try:
                    producer.produce(topic, VALUE, key=b"key-%d" % i)
                    break
                except BufferError:
                    producer.poll(0.05)
        producer.commit_transaction(60)

    async def run() -> float:
        started = time.perf_counter()
        for first in range(0, messages, batch):
            await anyio.to_thread.run_sync(one_transaction, first)
        return messages / (time.perf_counter() - started)

    return run  # type: ignore[return-value]


async def _aiokafka_transactions(bootstrap: str, messages: int, batch: int) -> float:
    import aiokafka

    topic = _new_topic(bootstrap)
    producer = aiokafka.AIOKafkaProducer(
        bootstrap_servers=bootstrap, transactional_id=f"bench-{uuid.uuid4().hex}", linger_ms=5
    )
    await producer.start()
    try:
        started = time.perf_counter()
        for first in range(0, messages, batch):
            async with producer.transaction():
                for i in range(first, min(first + batch, messages)):
                    await producer.send(topic, VALUE, key=b"key-%d" % i)
        return messages / (time.perf_counter() - started)
    finally:
        await producer.stop()


def _confluent_plain(bootstrap: str, messages: int) -> float:
    topic = _new_topic(bootstrap)
    producer = confluent_kafka.Producer(
        {"bootstrap.servers": bootstrap, "enable.idempotence": True, "acks": "all", "linger.ms": 5}
    )
    started = time.perf_counter()
    for i in range(messages):
        while True:
            try:
                producer.produce(topic, VALUE, key=b"key-%d" % i)
                break
            except BufferError:
                producer.poll(0.05)
    producer.flush(60)
    return messages / (time.perf_counter() - started)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--bootstrap", required=True)
    parser.add_argument("--messages", type=int, default=100_000)
    parser.add_argument("--batch", type=int, default=5_000)
    args = parser.parse_args()
    figures = {
        "confluent-kafka, worker thread, Trio": anyio.run(
            _confluent_transactions(args.bootstrap, args.messages, args.batch),
            backend="trio",  # type: ignore[arg-type]
        ),
        "confluent-kafka, worker thread, asyncio": anyio.run(
            _confluent_transactions(args.bootstrap, args.messages, args.batch),
            backend="asyncio",  # type: ignore[arg-type]
        ),
        "aiokafka, asyncio": asyncio.run(_aiokafka_transactions(args.bootstrap, args.messages, args.batch)),
        "confluent-kafka, no transactions (idempotent, acks=all)": _confluent_plain(args.bootstrap, args.messages),
    }
    for name, rate in figures.items():
        print(f"{name:60} {rate:12,.0f} messages/s")


if __name__ == "__main__":
    main()
