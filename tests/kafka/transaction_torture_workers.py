"""The processes of the transaction torture (test_transaction_torture.py), each killed with SIGKILL
and started again by the test. Each prints one line per event on stdout, flushed at once, and the
test keeps the lines it read: a line printed before a kill is known, whatever the process did not
get to print is not.

``python transaction_torture_workers.py producer BOOTSTRAP TOPIC PARTITIONS TRANSACTIONAL_ID FIRST``
    A transactional producer (confluent-kafka). Transaction K (from FIRST on) writes RECORDS records,
    ``ID:K:J`` to partition J % PARTITIONS, waits until they are sent, and commits, but every third
    one aborts. It prints
    ``begin K``, then ``committing K`` / ``aborting K`` before it asks, and ``committed K`` /
    ``aborted K`` once the broker answered. A fatal error prints ``fatal K ERROR`` and exits 3 (the
    test starts it again: its ``init_transactions`` fences the dead instance). It stops after the
    transaction under way when its stdin closes.

``python transaction_torture_workers.py consumer BOOTSTRAP TOPIC GROUP``
    A ``read_committed`` member of GROUP (confluent-kafka) that prints ``record PARTITION OFFSET
    VALUE`` for each record it is given and then commits the group's offsets synchronously: after a
    kill it starts from the last commit, so it may print a record again, at the same offset.

``python transaction_torture_workers.py library STREAM PARTITION:NEXT...``
    The library's ``adiskq.Consumer`` of the stream folder the gateway writes, one per partition
    from NEXT on, following (``end="wait"``), printing ``record PARTITION OFFSET VALUE``.
"""

from __future__ import annotations

import sys
import threading
from typing import Any

RECORDS = 6  # records of one transaction
ABORT_EVERY = 3  # transaction K aborts when K % ABORT_EVERY == ABORT_EVERY - 1


def say(line: str) -> None:
    """One event, written through at once: the test may kill this process at any moment."""
    sys.stdout.write(line + "\n")
    sys.stdout.flush()


def produce(bootstrap: str, topic: str, partitions: int, transactional_id: str, first: int) -> None:
    """Transactions from ``first`` on until stdin closes."""
    from confluent_kafka import KafkaException, Producer

    stop = threading.Event()
    threading.Thread(target=lambda: (sys.stdin.read(), stop.set()), daemon=True).start()
    producer = Producer(
        {
            "bootstrap.servers": bootstrap,
            "transactional.id": transactional_id,
            "transaction.timeout.ms": 10_000,
            "linger.ms": 1,
            "reconnect.backoff.max.ms": 200,
        }
    )
    producer.init_transactions(60)
    say("ready")
    k = first
    while not stop.is_set():
        commit = k % ABORT_EVERY != ABORT_EVERY - 1
        try:
            producer.begin_transaction()
            say(f"begin {k}")
            for j in range(RECORDS):
                producer.produce(topic, f"{transactional_id}:{k}:{j}".encode(), partition=j % partitions)
            # Written before it ends (librdkafka's abort would drop records still queued): an
            # aborted transaction's records are then on the partitions, for the readers to skip.
            assert producer.flush(60) == 0, "records left unsent"
            say(f"{'committing' if commit else 'aborting'} {k}")
            end_transaction(producer, commit)
            say(f"{'committed' if commit else 'aborted'} {k}")
        except KafkaException as raised:
            error = raised.args[0]
            if not error.txn_requires_abort():
                say(f"fatal {k} {error.name()}")
                sys.exit(3)
            say(f"aborting {k}")  # an abortable error: whatever the decision was, the transaction aborts
            producer.abort_transaction(60)
            say(f"aborted {k}")
        k += 1


def end_transaction(producer: Any, commit: bool) -> None:
    """Commit or abort, calling again while librdkafka says the error is retriable (its documented
    way: the outcome is then still to be decided)."""
    from confluent_kafka import KafkaException

    while True:
        try:
            if commit:
                producer.commit_transaction(60)
            else:
                producer.abort_transaction(60)
            return
        except KafkaException as raised:
            if not raised.args[0].retriable():
                raise


def consume(bootstrap: str, topic: str, group: str) -> None:
    """A read_committed group member, until killed."""
    from confluent_kafka import Consumer

    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": group,
            "isolation.level": "read_committed",
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
            "session.timeout.ms": 6000,
            "heartbeat.interval.ms": 500,
            "reconnect.backoff.max.ms": 200,
        }
    )
    consumer.subscribe([topic])
    say("ready")
    while True:
        messages = consumer.consume(100, 0.2)
        records = [m for m in messages if m.error() is None]
        for message in records:
            say(f"record {message.partition()} {message.offset()} {message.value().decode()}")
        if records:
            try:
                consumer.commit(asynchronous=False)
            except Exception as error:  # a commit lost to a gateway restart: the records come again
                say(f"uncommitted {error}")


def read_library(stream: str, starts: list[tuple[int, int]]) -> None:
    """One library consumer per partition, following, until killed."""
    import anyio

    import adiskq

    async def follow(partition: int, start: int) -> None:
        async with adiskq.Consumer(
            stream, partition=partition, start=start, end="wait", wait_for_stream=True
        ) as consumer:
            async for message in consumer:
                value = message.value.decode() if isinstance(message.value, bytes) else message.value
                say(f"record {message.partition} {message.offset} {value}")

    async def main() -> None:
        async with anyio.create_task_group() as group:
            for partition, start in starts:
                group.start_soon(follow, partition, start)
            say("ready")

    anyio.run(main)


if __name__ == "__main__":
    role, *args = sys.argv[1:]
    if role == "producer":
        produce(args[0], args[1], int(args[2]), args[3], int(args[4]))
    elif role == "consumer":
        consume(args[0], args[1], args[2])
    elif role == "library":
        read_library(args[0], [(int(p), int(n)) for p, n in (arg.split(":") for arg in args[1:])])
    else:
        raise SystemExit(f"no role {role!r}: producer, consumer or library")
