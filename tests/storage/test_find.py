"""adiskq.find: every message with a key, in offset order, bounded by time and count."""

from __future__ import annotations

import datetime as dt
import json
import os

import anyio
import pytest

import adiskq
from adiskq._sansio import keyindex as keyindex_format
from adiskq._sansio.naming import partition_for_key
from adiskq._storage.partition_reader import PartitionReader


def everything(path: str) -> list[adiskq.Message]:
    """Every message a reader can see, partition by partition, in offset order."""
    messages: list[adiskq.Message] = []
    for partition in adiskq.stats(path).partitions:
        reader = PartitionReader(os.path.join(path, "parts", f"{partition.partition:06d}"), partition.partition)
        with reader.cursor(partition.oldest_offset) as cursor:
            while batch := cursor.read(1000):
                messages.extend(batch)
    return messages


def with_key(path: str, key: bytes) -> list[adiskq.Message]:
    return [m for m in everything(path) if m.key == key]


async def fill(path: str, count: int, keys: int, **options: object) -> None:
    """``count`` messages over ``keys`` keys in a stream of small segments, pushed one by one and in
    batches (so some key index entries are still buffered when the producer closes)."""
    async with adiskq.Producer(path, **{"partitions": 3, "segment_size_bytes": 2048, **options}) as producer:  # type: ignore[arg-type]
        for start in range(0, count, 100):
            await producer.push_many(
                [
                    adiskq.Record(b"value-%d" % i, key=f"key-{i % keys}", timestamp=1_000_000 + i)
                    for i in range(start, start + 50)
                ]
            )
            for i in range(start + 50, start + 100):
                await producer.push(b"value-%d" % i, key=f"key-{i % keys}", timestamp=1_000_000 + i)


@pytest.fixture
async def stream(stream_path: str) -> str:
    """1,200 messages over 13 keys in three partitions of many segments."""
    await fill(stream_path, 1200, 13)
    return stream_path


pytestmark = pytest.mark.anyio


async def test_find_returns_every_message_with_the_key_in_offset_order(stream: str) -> None:
    """Many keys across many segments and partitions: each one's messages exactly, in order."""
    assert sum(p.segments for p in adiskq.stats(stream).partitions) > 20
    for number in range(13):
        key = f"key-{number}".encode()
        found = adiskq.find(stream, key)
        assert found == with_key(stream, key)
        assert len(found) in (92, 93)
        assert {m.partition for m in found} == {partition_for_key(key, 3)}


async def test_find_takes_str_and_bytes_keys(stream: str) -> None:
    """A str key is its UTF-8 bytes, as the producer stores it."""
    assert adiskq.find(stream, "key-4") == adiskq.find(stream, b"key-4") == adiskq.find(stream, bytearray(b"key-4"))


async def test_find_of_an_unknown_key_is_empty(stream: str) -> None:
    """No message has the key: an empty list, not an error."""
    assert adiskq.find(stream, "key-13") == []
    assert adiskq.find(stream, b"") == []


async def test_find_since_and_until_bound_the_timestamps(stream: str) -> None:
    """since is inclusive, until exclusive, in UTC ns or as datetimes."""
    everything_of_key = adiskq.find(stream, "key-1")
    since, until = everything_of_key[10].timestamp_ns, everything_of_key[20].timestamp_ns
    assert adiskq.find(stream, "key-1", since=since, until=until) == everything_of_key[10:20]
    assert adiskq.find(stream, "key-1", since=since) == everything_of_key[10:]
    assert adiskq.find(stream, "key-1", until=until) == everything_of_key[:20]
    assert adiskq.find(stream, "key-1", since=until, until=since) == []


async def test_find_limit_keeps_the_first_messages(stream: str) -> None:
    """limit=N: the first N in offset order (after the time bounds); 0 gives none."""
    everything_of_key = adiskq.find(stream, "key-2")
    assert adiskq.find(stream, "key-2", limit=5) == everything_of_key[:5]
    assert adiskq.find(stream, "key-2", limit=1000) == everything_of_key
    assert adiskq.find(stream, "key-2", limit=0) == []
    since = everything_of_key[30].timestamp_ns
    assert adiskq.find(stream, "key-2", since=since, limit=3) == everything_of_key[30:33]


@pytest.mark.parametrize("limit", [-1, 1.5, True, "3"])
def test_find_refuses_a_bad_limit(stream_path: str, limit: object) -> None:
    """A limit that is not a whole number of at least 0 is refused before anything is read."""
    with pytest.raises(adiskq.InvalidArgumentError, match="limit="):
        adiskq.find(stream_path, "key-1", limit=limit)  # type: ignore[arg-type]


def test_find_refuses_bad_keys_and_bounds(stream_path: str) -> None:
    """Keys are str or bytes; bounds are datetimes, ints or None."""
    with pytest.raises(TypeError, match="a key is str or bytes"):
        adiskq.find(stream_path, 42)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="since="):
        adiskq.find(stream_path, "key-1", since=1.5)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="until="):
        adiskq.find(stream_path, "key-1", until=True)


def test_find_in_a_missing_stream_is_refused(tmp_path: object) -> None:
    """No stream at the path: StreamNotFoundError, and nothing is created."""
    path = os.path.join(str(tmp_path), "nothing")
    with pytest.raises(adiskq.StreamNotFoundError):
        adiskq.find(path, "key")
    assert not os.path.exists(path)


async def test_hash_collisions_never_return_another_keys_message(
    stream_path: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With every key hashing alike, find() still returns only the messages with its own key."""
    monkeypatch.setattr(keyindex_format, "key_hash", lambda key: 0xC0111DE5)
    await fill(stream_path, 600, 5, partitions=1)
    for number in range(5):
        key = f"key-{number}".encode()
        found = adiskq.find(stream_path, key)
        assert len(found) == 120
        assert found == with_key(stream_path, key)


async def test_partial_collisions_are_told_apart(stream_path: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """Keys whose hashes share a few bits (some equal, some not) are each found exactly."""
    monkeypatch.setattr(keyindex_format, "key_hash", lambda key: len(key) & 3)
    await fill(stream_path, 500, 17, partitions=2)
    for number in range(17):
        key = f"key-{number}".encode()
        assert adiskq.find(stream_path, key) == with_key(stream_path, key)


async def test_after_vacuum_find_returns_only_what_remains(stream: str) -> None:
    """Vacuumed segments are gone from the answer; what remains is found in full."""
    before = adiskq.find(stream, "key-7")
    async with adiskq.Producer(stream) as producer:
        report = await producer.vacuum(adiskq.Retention(max_bytes=8 * 1024))
    assert report.removed_segments
    after = adiskq.find(stream, "key-7")
    oldest = adiskq.stats(stream).partitions[after[0].partition].oldest_offset
    assert after == [m for m in before if m.offset >= oldest]
    assert 0 < len(after) < len(before)


async def test_find_sees_what_a_running_producer_committed(stream_path: str) -> None:
    """While the producer writes, find() returns every committed message, buffered entries or not."""
    async with adiskq.Producer(stream_path, partitions=2, segment_size_bytes=2048) as producer:
        for i in range(301):
            await producer.push(b"%d" % i, key=f"k{i % 3}")
            if i % 50 == 0:
                assert adiskq.find(stream_path, "k0") == with_key(stream_path, b"k0")
        assert [m.value for m in adiskq.find(stream_path, "k2")] == [b"%d" % i for i in range(2, 301, 3)]


async def test_find_works_without_a_key_index(stream_path: str) -> None:
    """A stream kept without a key index answers the same, from its data."""
    await fill(stream_path, 600, 7, key_index=False)
    assert not [n for n in os.listdir(os.path.join(stream_path, "parts", "000000")) if n.endswith(".keyindex")]
    for number in range(7):
        key = f"key-{number}".encode()
        assert adiskq.find(stream_path, key) == with_key(stream_path, key)


async def test_find_returns_headers_and_random_keys(stream_path: str) -> None:
    """Messages come back whole (headers too), and a message pushed without a key is found by the key it got."""
    async with adiskq.Producer(stream_path, partitions=4) as producer:
        await producer.push(b"with headers", key="h", headers={"type": b"created"})
        partition, offset = await producer.push(b"no key")
    (message,) = adiskq.find(stream_path, "h")
    assert message.headers == {"type": b"created"}
    random_key = adiskq.read(stream_path, partition, offset).key
    assert [m.value for m in adiskq.find(stream_path, random_key)] == [b"no key"]


async def test_find_from_another_thread_while_pushing(stream_path: str) -> None:
    """find() is plain blocking code: run it in a worker thread beside a pushing task."""
    async with adiskq.Producer(stream_path, segment_size_bytes=2048) as producer:
        await producer.push_many([adiskq.Record(b"%d" % i, key="a" if i % 2 else "b") for i in range(400)])
        found = await anyio.to_thread.run_sync(adiskq.find, stream_path, "a")
    assert [m.value for m in found] == [b"%d" % i for i in range(1, 400, 2)]


async def test_find_takes_datetime_bounds(stream_path: str) -> None:
    """Datetime bounds (naive meaning UTC) select by the messages' timestamps."""
    start = dt.datetime(2024, 5, 1, 12, 0, tzinfo=dt.UTC)
    async with adiskq.Producer(stream_path) as producer:
        for minute in range(10):
            await producer.push(b"%d" % minute, key="t", timestamp=start + dt.timedelta(minutes=minute))
    found = adiskq.find(stream_path, "t", since=start + dt.timedelta(minutes=3), until=dt.datetime(2024, 5, 1, 12, 6))
    assert [m.value for m in found] == [b"3", b"4", b"5"]


async def test_find_follows_a_key_across_partition_count_changes(stream_path: str) -> None:
    """After partitions are added, a key's older messages (placed by the old count) come first."""
    pushed: dict[str, list[bytes]] = {f"key-{k}": [] for k in range(12)}
    for era, partitions in enumerate([2, 5, 7]):
        async with adiskq.Producer(stream_path, partitions=partitions, segment_size_bytes=2048) as producer:
            for i in range(120):
                key = f"key-{i % 12}"
                value = b"era%d-%d" % (era, i)
                await producer.push(value, key=key)
                pushed[key].append(value)
    history = json.loads(await anyio.Path(stream_path, "settings.json").read_text())["partition_history"]
    assert [change["partition_count"] for change in history] == [2, 5]
    moved = 0
    for key, values in pushed.items():
        found = adiskq.find(stream_path, key)
        assert [m.value for m in found] == values
        assert adiskq.find(stream_path, key, limit=15) == found[:15]
        moved += len({m.partition for m in found}) > 1
    assert moved  # some keys did change partition


def _overwrite(path: str, position: int, data: bytes) -> None:
    with open(path, "r+b") as file:
        file.seek(position)
        file.write(data)


@pytest.mark.parametrize("size", [1 << 62, 2**64 - 1], ids=["2**62", "2**64-1"])
async def test_find_names_a_damaged_index_size_as_damage(stream_path: str, size: int) -> None:
    """A damaged .index size field: find (searching the data, no key index) raises CorruptRecordError naming it."""
    async with adiskq.Producer(stream_path, partitions=1, key_index=False) as producer:
        await producer.push_many([adiskq.Record(b"v%03d" % i, key=b"k%d" % (i % 3)) for i in range(200)])
    index = os.path.join(stream_path, "parts", "000000", f"{0:020d}.index")
    await anyio.to_thread.run_sync(_overwrite, index, 199 * 24 + 16, size.to_bytes(8, "little"))
    with pytest.raises(adiskq.CorruptRecordError) as caught:
        adiskq.find(stream_path, b"k1")
    assert (caught.value.path, caught.value.position, caught.value.offset) == (index, 199 * 24, 199)
