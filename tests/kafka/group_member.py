"""A confluent-kafka group member for the tests: ``group_member.py BOOTSTRAP TOPIC GROUP STRATEGY``.

Prints one JSON line per change of its assignment (``{"assignment": [partitions]}``) and per message
(``{"value": "..."}``), commits each message synchronously after printing it (a commit refused during
a rebalance is let go, as an application would), and closes (leaving the group) on SIGTERM.
"""

from __future__ import annotations

import contextlib
import json
import signal
import sys

from confluent_kafka import Consumer, KafkaException

bootstrap, topic, group, strategy = sys.argv[1:5]
stopping = False


def stop(signum: int, frame: object) -> None:
    global stopping
    stopping = True


signal.signal(signal.SIGTERM, stop)
consumer = Consumer(
    {
        "bootstrap.servers": bootstrap,
        "group.id": group,
        "partition.assignment.strategy": strategy,
        "auto.offset.reset": "earliest",
        "enable.auto.commit": False,
        "session.timeout.ms": 1000,
        "heartbeat.interval.ms": 100,
        "topic.metadata.refresh.interval.ms": 1000,
    }
)
consumer.subscribe([topic])
shown: list[int] | None = None
while not stopping:
    message = consumer.poll(0.05)
    assignment = sorted(tp.partition for tp in consumer.assignment())
    if assignment != shown:
        shown = assignment
        print(json.dumps({"assignment": assignment}), flush=True)
    if message is None or message.error() is not None:
        continue
    print(json.dumps({"value": message.value().decode()}), flush=True)
    # A commit refused while the group rebalances (as Kafka refuses it) is let go: the message comes again.
    with contextlib.suppress(KafkaException):
        consumer.commit(message, asynchronous=False)
consumer.close()
