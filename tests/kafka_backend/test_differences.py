"""What differs between the backends, each difference declared in the capability table and enforced
when the producer, reader or function is made (or, for the topic's own settings, opened): never
in the middle of a stream. Each test here applies to one backend, and says why."""

from __future__ import annotations

import os
import pathlib
from typing import Any

import pytest
from confluent_kafka.admin import AdminClient
from confluent_kafka.cimpl import NewTopic
from support.backends import Where

import adiskq
from adiskq._sansio.capabilities import FEATURES, markdown_table
from adiskq._sansio.naming import partition_for_key

pytestmark = pytest.mark.anyio

README = pathlib.Path(__file__).resolve().parents[2] / "README.md"


def _url(broker: Any, topic: str) -> str:
    return f"kafka://{broker.bootstrap}/{topic}"


# -- refused on Kafka, at construction: the local stream has these, a Kafka topic does not --------

KAFKA_REFUSALS = [
    (lambda url: adiskq.Producer(url, key_index=False), "key_index="),
    (lambda url: adiskq.Producer(url, segment_size_bytes=1 << 20), "segment_size_bytes="),
    (lambda url: adiskq.Producer(url, retention=adiskq.Retention(max_disk_usage=0.5)), "max_disk_usage"),
    (lambda url: adiskq.Consumer(url, tags=["created"]), "tags="),
    (lambda url: adiskq.Consumer(url, wait_for_stream=True), "wait_for_stream"),
    (lambda url: adiskq.ConsumerGroup(url), "unnamed ConsumerGroup"),
    (lambda url: adiskq.ConsumerGroup(url, "g", exclusive=True), "exclusive=True"),
    (lambda url: adiskq.ConsumerGroup(url, "g", max_attempts=3), "max_attempts="),
    (lambda url: adiskq.ConsumerGroup(url, "g", tags=["x"]), "tags="),
    (lambda url: adiskq.find(url, "k"), "adiskq.find()"),
    (lambda url: adiskq.read(url, 0, 0), "adiskq.read()"),
    (lambda url: adiskq.stats(url), "adiskq.stats()"),
]


@pytest.mark.parametrize(("make", "feature"), KAFKA_REFUSALS)
def test_kafka_refuses_what_it_lacks_when_asked(make: Any, feature: str) -> None:
    """Kafka only: these features are the local stream's (its files, its tag column, its groups)."""
    with pytest.raises(adiskq.UnsupportedFeatureError) as raised:
        make("kafka://127.0.0.1:9/orders")  # nothing is reached: refused before any I/O
    assert raised.value.backend == "kafka"
    assert feature in str(raised.value)
    assert raised.value.instead  # says what to use instead


async def test_retry_is_refused_on_kafka(kafka_broker: Any) -> None:
    """Kafka only: a retry needs the local group's retry stream, which Kafka has no counterpart of."""
    url = _url(kafka_broker, f"retry-{os.urandom(4).hex()}")
    async with adiskq.Producer(url) as producer:
        await producer.push(b"x")
    async with adiskq.ConsumerGroup(url, "g") as group:
        message = await group.__anext__()
        with pytest.raises(adiskq.UnsupportedFeatureError, match="dead_letter"):
            await group.retry(message, delay=5)


def test_local_streams_refuse_the_kafka_client_options(tmp_path: pathlib.Path) -> None:
    """Local only: a stream's folder has no Kafka client to configure, and places keys by FNV-1."""
    path = os.fspath(tmp_path / "s")
    for make in (
        lambda: adiskq.Producer(path, kafka={"acks": "all"}),
        lambda: adiskq.Consumer(path, kafka={}),
        lambda: adiskq.ConsumerGroup(path, "g", kafka={}),
        lambda: adiskq.lag(path, "g", kafka={}),
        lambda: adiskq.Producer(path, partitioner="murmur2"),
    ):
        with pytest.raises(adiskq.UnsupportedFeatureError) as raised:
            make()
        assert raised.value.backend == "local"


def test_credentials_never_go_in_the_url() -> None:
    """Kafka only: a URL is kept by shells and logs, so secrets go in kafka= or a properties file."""
    with pytest.raises(adiskq.InvalidArgumentError, match="credentials"):
        adiskq.Producer("kafka://user:secret@127.0.0.1:9092/orders")


async def test_the_client_configuration_may_come_from_a_properties_file(
    kafka_broker: Any, tmp_path: pathlib.Path
) -> None:
    """Kafka only: kafka= takes the properties file adiskq mirror --kafka-config reads."""
    url = _url(kafka_broker, f"props-{os.urandom(4).hex()}")
    good = tmp_path / "client.properties"
    good.write_text("# a client's settings\nclient.id=adiskq-test\nlinger.ms=0\n")
    async with adiskq.Producer(url, kafka=good) as producer:
        await producer.push(b"x")
    bad = tmp_path / "bad.properties"
    bad.write_text("no.such.setting=1\n")
    with pytest.raises(adiskq.InvalidArgumentError, match=r"no\.such\.setting"):
        async with adiskq.Producer(url, kafka=bad):
            pass


# -- flush="sync": only where an acknowledged write lives on two machines --------------------------


async def test_sync_flush_is_refused_on_a_topic_with_one_in_sync_replica(kafka_broker: Any) -> None:
    """Kafka only: flush="sync" promises a write survives losing a machine; one node's topic cannot."""
    url = _url(kafka_broker, f"sync-{os.urandom(4).hex()}")
    producer = adiskq.Producer(url, flush="sync")
    with pytest.raises(adiskq.UnsupportedFeatureError, match=r"min\.insync\.replicas=1"):
        async with producer:
            pass
    assert producer.closed


async def test_sync_flush_on_a_cluster_with_two_in_sync_replicas(kafka_cluster: Any) -> None:
    """Kafka only: the three-node cluster's topics have min.insync.replicas=2, so flush="sync" is taken."""
    url = _url(kafka_cluster, f"sync-{os.urandom(4).hex()}")
    async with adiskq.Producer(url, flush="sync", partitions=2) as producer:
        receipt = await producer.push(b"kept twice", key="k")
    async with adiskq.Consumer(url, partition=receipt.partition, end="close") as consumer:
        assert [m.value async for m in consumer] == [b"kept twice"]


# -- placement -------------------------------------------------------------------------------------


def _java_murmur2(data: bytes) -> int:
    """Kafka's Utils.murmur2 (what the Java client hashes a key with), written from its definition."""
    seed, m, r = 0x9747B28C, 0x5BD1E995, 24
    length = len(data)
    h = (seed ^ length) & 0xFFFFFFFF
    for i in range(0, length - length % 4, 4):
        k = int.from_bytes(data[i : i + 4], "little")
        k = (k * m) & 0xFFFFFFFF
        k ^= k >> r
        k = (k * m) & 0xFFFFFFFF
        h = (h * m) & 0xFFFFFFFF
        h ^= k
    tail = data[length - length % 4 :]
    if len(tail) >= 3:
        h ^= tail[2] << 16
    if len(tail) >= 2:
        h ^= tail[1] << 8
    if tail:
        h ^= tail[0]
        h = (h * m) & 0xFFFFFFFF
    h ^= h >> 13
    h = (h * m) & 0xFFFFFFFF
    h ^= h >> 15
    return h


async def test_keys_are_placed_as_java_clients_place_them_or_by_fnv1(where: Where) -> None:
    """Both backends, each with its own default: murmur2 on Kafka (Java's), FNV-1 on a stream; and
    partitioner="fnv1" on Kafka places keys as the local stream does."""
    keys = [f"customer-{i}" for i in range(30)]
    place = where.new()
    async with adiskq.Producer(place, partitions=5) as producer:
        receipts = [await producer.push(b"", key=key) for key in keys]
    local_placement = {key: partition_for_key(key.encode(), 5) for key in keys}
    if where.kafka:
        assert {k: r.partition for k, r in zip(keys, receipts, strict=True)} == {
            key: (_java_murmur2(key.encode()) & 0x7FFFFFFF) % 5 for key in keys
        }
        fnv_place = where.new("fnv")
        async with adiskq.Producer(fnv_place, partitions=5, partitioner="fnv1") as producer:
            receipts = [await producer.push(b"", key=key) for key in keys]
    assert {k: r.partition for k, r in zip(keys, receipts, strict=True)} == local_placement


# -- the table itself ------------------------------------------------------------------------------


def test_capabilities_of_a_path_and_of_a_url(tmp_path: pathlib.Path) -> None:
    local = adiskq.capabilities(tmp_path / "s")
    kafka = adiskq.capabilities("kafka://127.0.0.1:9092/orders")
    assert set(local) == set(kafka) == {feature.name for feature in FEATURES}
    assert local["retry()"].supported
    assert not kafka["retry()"].supported
    assert "dead_letter" in kafka["retry()"].how  # what to use instead
    assert kafka["named ConsumerGroup"].supported
    assert kafka["dead_letter()"].supported
    assert not local["kafka= (client configuration)"].supported


def test_the_readme_table_is_the_capability_table() -> None:
    """README's table is the table the code enforces, row for row."""
    assert markdown_table() in README.read_text()


# -- push_many: each record acknowledged on its own ---------------------------------------------


async def test_a_record_over_the_client_limit_fails_push_many_whole(kafka_broker: Any) -> None:
    """Kafka only: its client's limit (message.max.bytes) is checked before anything is sent."""
    url = _url(kafka_broker, f"big-{os.urandom(4).hex()}")
    async with adiskq.Producer(url) as producer:
        with pytest.raises(adiskq.MessageTooLargeError, match=r"message\.max\.bytes"):
            await producer.push_many([b"small", b"x" * 1_000_001])
        await producer.push(b"after")
    async with adiskq.Consumer(url, end="close") as consumer:
        assert [m.value async for m in consumer] == [b"after"]


async def test_push_many_says_which_records_kafka_took(kafka_broker: Any) -> None:
    """Kafka only: records are acknowledged one by one, so when the broker refuses some (here the
    topic's max.message.bytes is below the client's limit), PartialWriteError gives the receipts of
    those written and None for the others."""
    topic = f"partial-{os.urandom(4).hex()}"
    admin = AdminClient({"bootstrap.servers": kafka_broker.bootstrap})
    admin.create_topics([NewTopic(topic, 2, 1, config={"max.message.bytes": "2000"})])[topic].result(60)
    url = _url(kafka_broker, topic)
    records = [adiskq.Record(b"s", key="a"), adiskq.Record(b"x" * 5000, key="b"), adiskq.Record(b"t", key="a")]
    async with adiskq.Producer(url, partitioner="fnv1") as producer:
        assert producer.partitions == 2
        with pytest.raises(adiskq.PartialWriteError) as raised:
            await producer.push_many(records)
    first, refused, third = raised.value.receipts  # "a" goes to partition 0, "b" to 1 (FNV-1)
    assert refused is None
    assert first == (0, 0)
    assert third == (0, 1)
    async with adiskq.Consumer(url, end="close") as consumer:
        assert [(m.partition, m.offset, m.value) async for m in consumer] == [(0, 0, b"s"), (0, 1, b"t")]
