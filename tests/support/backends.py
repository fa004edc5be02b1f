"""The two backends the API's tests run on: a local stream's folder, and a topic of the suite's Apache
Kafka (``kafka_broker``) named by a ``kafka://`` URL. A test takes the ``where`` fixture
(tests/conftest.py) and makes its streams or topics with ``where.new()``; what it asks of the API
is the same on both."""

from __future__ import annotations

import os
import pathlib
import uuid

BACKENDS = ("local", "kafka")


class Where:
    """A factory of fresh places to write: ``new()`` gives a stream path or a topic URL."""

    def __init__(self, backend: str, tmp_path: pathlib.Path, bootstrap: str | None) -> None:
        self.backend = backend
        self._tmp_path = tmp_path
        self._bootstrap = bootstrap

    @property
    def kafka(self) -> bool:
        return self.backend == "kafka"

    def new(self, name: str = "orders") -> str:
        unique = f"{name}-{uuid.uuid4().hex[:10]}"
        if self._bootstrap is None:
            return os.fspath(self._tmp_path / unique)
        return f"kafka://{self._bootstrap}/{unique}"

    def dead_letters(self, place: str, group: str) -> str:
        """Where a group's dead letters go by default: the stream's groups/NAME/dead-letters, or
        the topic TOPIC.NAME.dead-letters."""
        if self.kafka:
            return f"{place}.{group}.dead-letters"
        return os.path.join(place, "groups", group, "dead-letters")


def key_for(partition: int, partitions: int) -> str:
    """A key that FNV-1 (a stream's placement, ``partitioner="fnv1"`` on Kafka) puts on ``partition``."""
    from adiskq._sansio.naming import partition_for_key

    for i in range(10_000):
        key = f"key-{i}"
        if partition_for_key(key.encode(), partitions) == partition:
            return key
    raise AssertionError(f"no key of the first 10,000 lands on partition {partition} of {partitions}")


async def write_to(place: str, messages: list[bytes], partition: int = 0, partitions: int = 1) -> None:
    """Push ``messages`` to ``partition`` of a stream or topic of ``partitions`` (made or grown to it)."""
    await fill(place, {partition: messages}, partitions)


async def fill(place: str, shares: dict[int, list[bytes]], partitions: int) -> None:
    """Push each partition's share with one producer (opening one costs a Kafka topic most of a second)."""
    import adiskq

    async with adiskq.Producer(place, partitions=partitions, partitioner="fnv1") as producer:
        for partition, messages in shares.items():
            key = key_for(partition, partitions)
            await producer.push_many([adiskq.Record(m, key=key) for m in messages])


async def fill_for_retention(place: str, count: int) -> None:
    """``count`` records of 86 bytes in partition 0 (a stream's in 1 KiB segments, so that retention
    has whole segments to delete)."""
    import adiskq
    from adiskq._sansio.capabilities import is_kafka_url

    options: dict[str, int] = {} if is_kafka_url(place) else {"segment_size_bytes": 1024}
    async with adiskq.Producer(place, **options) as producer:  # type: ignore[arg-type]
        for i in range(count):  # one push at a time: a stream rolls its segment between writes
            await producer.push(b"x" * 80 + b"%06d" % i)


async def delete_oldest(place: str, count: int) -> int:
    """Delete the oldest of the ``count`` records of partition 0 as retention does, and return the
    oldest offset kept: a stream keeps its last 2 KiB of sealed segments (a vacuum), a topic its
    second half (Kafka's DeleteRecords, what retention.ms does when it expires)."""
    import adiskq
    from adiskq._sansio.capabilities import is_kafka_url

    if not is_kafka_url(place):
        async with adiskq.Producer(place) as producer:
            await producer.vacuum(adiskq.Retention(max_bytes=2048))
        oldest = adiskq.stats(place).partitions[0].oldest_offset
        assert oldest > 0, "the vacuum should have deleted a segment"
        return oldest
    import confluent_kafka
    from confluent_kafka.admin import AdminClient

    from adiskq.kafka._mirror_config import parse_kafka_url

    end = parse_kafka_url(place)
    admin = AdminClient({"bootstrap.servers": end.bootstrap})
    kept = count // 2
    (future,) = admin.delete_records([confluent_kafka.TopicPartition(end.topic, 0, kept)]).values()
    assert future.result(30).low_watermark == kept
    return kept
