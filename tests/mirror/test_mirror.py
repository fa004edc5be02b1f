"""``adiskq.kafka.Mirror`` against Apache Kafka (the suite's ``kafka_broker``): records round-trip
exactly both ways, positions resume, and what would break exactness is refused."""

from __future__ import annotations

import datetime as dt
import os
import shutil

import anyio
import anyio.to_thread
import confluent_kafka
import pytest
from confluent_kafka.admin import AdminClient
from mirror_support import create_topic, new_topic_name, produce, read_topic, wait_for_records

import adiskq
from adiskq._errors import InvalidArgumentError, MirrorDivergedError, MirrorError
from adiskq._storage.upgrade import give_identity
from adiskq.kafka import Mirror
from adiskq.kafka._mirror_mapping import EXACT_HEADERS, OFFSET_HEADER

pytestmark = pytest.mark.anyio


def _url(broker: object, topic: str) -> str:
    return f"kafka://{broker.bootstrap}/{topic}"  # type: ignore[attr-defined]


async def _ship(source: str, target: str, **options: object) -> Mirror:
    async with Mirror(source, target, once=True, **options) as mirror:  # type: ignore[arg-type]
        await mirror.run()
    return mirror


async def _local(path: str) -> list[adiskq.Message]:
    async with adiskq.Consumer(path, end="close") as consumer:
        messages = [message async for message in consumer]
    return sorted(messages, key=lambda message: (message.partition, message.offset))


async def test_a_stream_goes_to_kafka_and_back_exactly(kafka_broker: object, tmp_path: os.PathLike[str]) -> None:
    source = os.path.join(tmp_path, "orders")
    topic = new_topic_name()
    async with adiskq.Producer(source, partitions=3) as producer:
        await producer.push_many(
            [
                adiskq.Record(
                    b"value %d" % i,
                    key=f"customer-{i % 7}",
                    headers={"type": b"created", "n": b"%d" % i} if i % 2 else None,
                    timestamp=1_700_000_000_000_000_000 + i * 1_000_000,
                    tag="vip" if i % 5 == 0 else None,
                )
                for i in range(500)
            ]
        )
    shipped = await _ship(source, _url(kafka_broker, topic), create_topic=True)
    assert shipped.status.shipped == 500
    local = await _local(source)
    in_kafka = read_topic(kafka_broker.bootstrap, topic)  # type: ignore[attr-defined]
    by_partition = {p: [r for r in in_kafka if r.partition == p] for p in range(3)}
    for p in range(3):
        mine = [m for m in local if m.partition == p]
        theirs = by_partition[p]
        assert [(r.key, r.value, r.timestamp_ms) for r in theirs] == [
            (m.key, m.value, m.timestamp_ns // 1_000_000) for m in mine
        ]
        assert [r.headers for r in theirs] == [
            [*m.headers.items(), *([("adiskq.tag", m.tag.encode())] if m.tag else [])] for m in mine
        ]

    back = os.path.join(tmp_path, "back")
    copied = await _ship(_url(kafka_broker, topic), back)
    assert copied.status.shipped == 500
    returned = await _local(back)
    assert [(m.partition, m.key, m.value, m.timestamp_ns, m.tag) for m in returned] == [
        (m.partition, m.key, m.value, m.timestamp_ns, m.tag) for m in local
    ]
    assert [{k: v for k, v in m.headers.items() if k != OFFSET_HEADER} for m in returned] == [m.headers for m in local]
    assert [int(m.headers[OFFSET_HEADER]) for m in returned] == [r.offset for r in in_kafka]


async def test_kafka_records_that_do_not_map_come_back_to_kafka_as_they_were(
    kafka_broker: object, tmp_path: os.PathLike[str]
) -> None:
    bootstrap = kafka_broker.bootstrap  # type: ignore[attr-defined]
    first, second = new_topic_name(), new_topic_name()
    create_topic(bootstrap, first, 2)
    records = [
        (0, None, b"null key", [("a", b"1"), ("a", b"2")], 1_700_000_000_001),
        (0, b"k", None, [("n", None)], 1_700_000_000_002),
        (1, None, None, [], 1_700_000_000_003),
        (1, b"", b"", [(OFFSET_HEADER, b"x"), ("adiskq.tag", b"t")], 1_700_000_000_004),
    ]
    produce(bootstrap, first, records, transactional=True)
    stream = os.path.join(tmp_path, "copy")
    await _ship(_url(kafka_broker, first), stream)
    stored = await _local(stream)
    # A new stream is format 5: a repeated name and a null value are kept as Kafka had them.
    assert isinstance(stored[0].headers, adiskq.Headers)
    assert stored[0].header_list[:2] == (("a", b"1"), ("a", b"2"))
    assert EXACT_HEADERS not in stored[0].headers
    assert stored[1].header_list[0] == ("n", None)
    # A name the mirror reserves keeps the exact list.
    assert EXACT_HEADERS in stored[3].headers
    await _ship(stream, _url(kafka_broker, second), create_topic=True)
    assert [(r.partition, r.key, r.value, r.headers, r.timestamp_ms) for r in read_topic(bootstrap, second)] == [
        (p, k, v, h, t) for p, k, v, h, t in records
    ]


async def test_a_restarted_mirror_ships_only_what_is_new(kafka_broker: object, tmp_path: os.PathLike[str]) -> None:
    source = os.path.join(tmp_path, "s")
    topic = new_topic_name()
    url = _url(kafka_broker, topic)
    async with adiskq.Producer(source, partitions=2) as producer:
        await producer.push_many([adiskq.Record(b"a%d" % i, key=f"k{i}") for i in range(50)])
    assert (await _ship(source, url, create_topic=True)).status.shipped == 50
    assert (await _ship(source, url)).status.shipped == 0
    async with adiskq.Producer(source) as producer:
        await producer.push_many([adiskq.Record(b"b%d" % i, key=f"k{i}") for i in range(30)])
    assert (await _ship(source, url)).status.shipped == 30
    values = [r.value for r in read_topic(kafka_broker.bootstrap, topic)]  # type: ignore[attr-defined]
    assert sorted(values) == sorted([b"a%d" % i for i in range(50)] + [b"b%d" % i for i in range(30)])

    back = os.path.join(tmp_path, "back")
    assert (await _ship(url, back)).status.shipped == 80
    assert (await _ship(url, back)).status.shipped == 0
    async with adiskq.Producer(source) as producer:
        await producer.push(b"c", key="k1")
    await _ship(source, url)
    assert (await _ship(url, back)).status.shipped == 1
    assert len(await _local(back)) == 81


async def test_a_stream_that_lost_what_was_shipped_is_refused(kafka_broker: object, tmp_path: os.PathLike[str]) -> None:
    """A power cut with flush="async" can take back records the mirror shipped, and new messages then
    take their offsets: a copy of the stream's folder made before the last pushes stands for it."""
    source = os.path.join(tmp_path, "s")
    earlier = os.path.join(tmp_path, "earlier")
    url = _url(kafka_broker, new_topic_name())
    async with adiskq.Producer(source) as producer:
        await producer.push_many([adiskq.Record(b"m%d" % i) for i in range(7)])
    await _ship(source, url, create_topic=True)  # gives the stream its identity, which the copy keeps
    shutil.copytree(source, earlier)
    async with adiskq.Producer(source) as producer:
        await producer.push_many([adiskq.Record(b"m%d" % i) for i in range(7, 10)])
    await _ship(source, url)

    async with adiskq.Producer(earlier) as producer:  # the same identity, offsets 7..9 others' now
        await producer.push_many([adiskq.Record(b"other %d" % i) for i in range(3)])
    with pytest.raises(MirrorDivergedError, match="offset 9 of partition 0") as refused:
        await _ship(earlier, url)
    assert (refused.value.partition, refused.value.offset) == (0, 9)

    shutil.rmtree(earlier)
    shutil.copytree(source, earlier)
    # The partition now ends at 8: offsets 8 and 9 are lost.
    os.truncate(os.path.join(earlier, "parts", "000000", "00000000000000000000.index"), 24 * 8)
    with pytest.raises(MirrorDivergedError, match="ends at offset 8"):
        await _ship(earlier, url)
    assert [r.value for r in read_topic(kafka_broker.bootstrap, url.rsplit("/", 1)[1])] == [  # type: ignore[attr-defined]
        b"m%d" % i for i in range(10)
    ]


async def test_partitions_are_preserved_or_placed_by_murmur2(kafka_broker: object, tmp_path: os.PathLike[str]) -> None:
    bootstrap = kafka_broker.bootstrap  # type: ignore[attr-defined]
    source = os.path.join(tmp_path, "s")
    keys = [f"customer-{i}" for i in range(40)]
    async with adiskq.Producer(source, partitions=4) as producer:
        await producer.push_many([adiskq.Record(key.encode(), key=key) for key in keys])
    small = new_topic_name()
    create_topic(bootstrap, small, 3)
    with pytest.raises(MirrorError, match="has 3 partitions and stream"):
        await _ship(source, _url(kafka_broker, small))

    preserved = new_topic_name()
    await _ship(source, _url(kafka_broker, preserved), create_topic=True, partitions=6)
    local = {m.key: m.partition for m in await _local(source)}
    assert {r.key: r.partition for r in read_topic(bootstrap, preserved)} == local

    rehashed, java_placed = new_topic_name(), new_topic_name()
    create_topic(bootstrap, rehashed, 5)
    create_topic(bootstrap, java_placed, 5)
    await _ship(source, _url(kafka_broker, rehashed), partitioning="rehash")
    producer = confluent_kafka.Producer({"bootstrap.servers": bootstrap, "partitioner": "murmur2_random"})
    for key in keys:
        producer.produce(java_placed, b"", key.encode())
    assert producer.flush(60) == 0
    placed = {r.key: r.partition for r in read_topic(bootstrap, java_placed)}
    assert {r.key: r.partition for r in read_topic(bootstrap, rehashed)} == placed
    assert len(set(placed.values())) > 1

    with pytest.raises(MirrorError, match="placed records with partitioning 'rehash'"):
        await _ship(source, _url(kafka_broker, rehashed))
    with pytest.raises(InvalidArgumentError, match="from Kafka, partition p goes to partition p"):
        Mirror(_url(kafka_broker, rehashed), os.path.join(tmp_path, "x"), partitioning="rehash")


async def test_a_second_copy_of_a_mirror_fences_the_first(kafka_broker: object, tmp_path: os.PathLike[str]) -> None:
    source = os.path.join(tmp_path, "s")
    topic = new_topic_name()
    url = _url(kafka_broker, topic)
    async with adiskq.Producer(source) as producer:
        await producer.push_many([adiskq.Record(b"m%d" % i) for i in range(20)])
    # The second one's init_transactions() fences the first.
    async with Mirror(source, url, create_topic=True, once=True) as stale, Mirror(source, url, once=True) as current:
        with pytest.raises(MirrorError, match="stopped for good"):
            await stale.run()
        await current.run()
    assert [r.value for r in read_topic(kafka_broker.bootstrap, topic)] == [b"m%d" % i for i in range(20)]  # type: ignore[attr-defined]


async def test_records_removed_before_they_were_shipped_fail_or_are_skipped(
    kafka_broker: object, tmp_path: os.PathLike[str]
) -> None:
    source = os.path.join(tmp_path, "s")
    async with adiskq.Producer(source, segment_size_bytes=1024) as producer:
        for _ in range(60):
            await producer.push(b"x" * 100)
        await producer.vacuum(adiskq.Retention(max_bytes=2048))
    oldest = adiskq.stats(source).partitions[0].oldest_offset
    assert oldest > 0
    with pytest.raises(MirrorError, match=f"offsets 0..{oldest - 1} were removed by retention"):
        await _ship(source, _url(kafka_broker, new_topic_name()), create_topic=True, start=0)
    topic = new_topic_name()
    skipped = await _ship(source, _url(kafka_broker, topic), create_topic=True, start=0, on_data_loss="skip")
    assert skipped.status.skipped == [(0, 0, oldest)]
    assert skipped.status.shipped == 60 - oldest


async def test_kafka_records_removed_before_they_were_copied_fail_or_are_skipped(
    kafka_broker: object, tmp_path: os.PathLike[str]
) -> None:
    bootstrap = kafka_broker.bootstrap  # type: ignore[attr-defined]
    topic = new_topic_name()
    create_topic(bootstrap, topic, 1)
    produce(bootstrap, topic, [(0, b"k", b"%d" % i, [], 1) for i in range(10)])
    stream, other = os.path.join(tmp_path, "copy"), os.path.join(tmp_path, "other")
    await _ship(_url(kafka_broker, topic), stream)
    shutil.copytree(stream, other)
    produce(bootstrap, topic, [(0, b"k", b"%d" % i, [], 1) for i in range(10, 20)])
    admin = AdminClient({"bootstrap.servers": bootstrap})
    deleted = admin.delete_records([confluent_kafka.TopicPartition(topic, 0, 15)])
    next(iter(deleted.values())).result(60)
    with pytest.raises(MirrorError, match=r"no longer holds offset 10 \(it holds 15\.\.19\)"):
        await _ship(_url(kafka_broker, topic), stream)
    skipped = await _ship(_url(kafka_broker, topic), other, on_data_loss="skip")
    assert skipped.status.skipped == [(0, 10, 15)]
    assert [m.value for m in await _local(other)] == [b"%d" % i for i in [*range(10), *range(15, 20)]]


async def test_a_mirror_starts_where_it_is_told_and_follows(kafka_broker: object, tmp_path: os.PathLike[str]) -> None:
    source = os.path.join(tmp_path, "s")
    topic = new_topic_name()
    url = _url(kafka_broker, topic)
    async with adiskq.Producer(source) as producer:
        await producer.push_many([adiskq.Record(b"old %d" % i) for i in range(10)])
    with pytest.raises(MirrorError, match="no identity yet"):
        async with adiskq.Producer(source) as producer, Mirror(source, url, create_topic=True):
            pass
    give_identity(source)  # what `adiskq upgrade --identity` does, while nothing has the stream open
    bootstrap = kafka_broker.bootstrap  # type: ignore[attr-defined]
    async with (
        adiskq.Producer(source) as producer,
        Mirror(source, url, create_topic=True, start="newest") as mirror,
        anyio.create_task_group() as tasks,
    ):
        tasks.start_soon(mirror.run)
        await producer.push_many([adiskq.Record(b"new %d" % i) for i in range(5)])
        followed = await anyio.to_thread.run_sync(wait_for_records, bootstrap, topic, 5)
        tasks.cancel_scope.cancel()
    assert [r.value for r in followed] == [b"new %d" % i for i in range(5)]
    assert [r.value for r in read_topic(bootstrap, topic)] == [b"new %d" % i for i in range(5)]


async def test_a_mirror_starts_at_a_time_both_ways(kafka_broker: object, tmp_path: os.PathLike[str]) -> None:
    source, back = os.path.join(tmp_path, "s"), os.path.join(tmp_path, "back")
    base = dt.datetime(2026, 1, 1, tzinfo=dt.UTC)
    async with adiskq.Producer(source) as producer:
        await producer.push_many(
            [adiskq.Record(b"m%d" % i, timestamp=base + dt.timedelta(seconds=i)) for i in range(6)]
        )
    topic = new_topic_name()
    await _ship(source, _url(kafka_broker, topic), create_topic=True, start=base + dt.timedelta(seconds=2))
    assert [r.value for r in read_topic(kafka_broker.bootstrap, topic)] == [b"m2", b"m3", b"m4", b"m5"]  # type: ignore[attr-defined]
    await _ship(_url(kafka_broker, topic), back, start=base + dt.timedelta(seconds=4))
    assert [m.value for m in await _local(back)] == [b"m4", b"m5"]


async def test_a_target_stream_written_by_others_is_refused(kafka_broker: object, tmp_path: os.PathLike[str]) -> None:
    bootstrap = kafka_broker.bootstrap  # type: ignore[attr-defined]
    topic = new_topic_name()
    create_topic(bootstrap, topic, 1)
    produce(bootstrap, topic, [(0, b"k", b"v", [], 1)])
    stream = os.path.join(tmp_path, "mine")
    async with adiskq.Producer(stream) as producer:
        await producer.push(b"not from Kafka")
    with pytest.raises(MirrorError, match=r"no 'adiskq\.kafka\.offset' header"):
        await _ship(_url(kafka_broker, topic), stream)


def test_bad_arguments_are_refused_at_construction(tmp_path: os.PathLike[str]) -> None:
    path = os.fspath(tmp_path)
    for kwargs, message in [
        ({"partitioning": "random"}, "partitioning='random'"),
        ({"on_data_loss": "raise"}, "on_data_loss='raise'"),
        ({"start": -1}, "start=-1"),
        ({"batch_messages": 0}, "batch_messages=0"),
        ({"kafka_config": {"transactional.id": "x"}}, "leave it out"),
    ]:
        with pytest.raises(InvalidArgumentError, match=message):
            Mirror(path, "kafka://127.0.0.1:9092/t", **kwargs)  # type: ignore[arg-type]
    for source, target, message in [
        (path, path, "exactly one end"),
        (path, "kafka://127.0.0.1:9092", "names no topic"),
        (path, "kafka://alice:secret@127.0.0.1:9092/t", "holds credentials"),
        (path, "kafka://127.0.0.1:99999/t", "is not HOST:PORT"),
        (path, "kafka://127.0.0.1:9092/bad topic", "not a legal Kafka topic name"),
    ]:
        with pytest.raises(InvalidArgumentError, match=message):
            Mirror(source, target)
