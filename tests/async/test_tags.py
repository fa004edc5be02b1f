"""Tags: pushed with a message, read back, and filtering consumers that read only the records they want.

Local stream only: tags= filters are refused on Kafka (README's capability table); push(tag=) read
back as message.tag on both backends is tested in tests/kafka_backend/test_api_both_backends.py.
"""

from __future__ import annotations

import json
import os
import pathlib
import struct
from typing import Any

import anyio
import pytest
from support.cli import invoke
from support.consumer import read_and_commit

import adiskq
from adiskq._async import follower
from adiskq._sansio import tags as tags_format
from adiskq._sansio.naming import PARTS_DIR, partition_dir_name

pytestmark = pytest.mark.anyio

TAG_CYCLE = [f"t{i}" for i in range(20)]


def tag_file(stream_path: str, base: int = 0) -> str:
    return os.path.join(stream_path, PARTS_DIR, partition_dir_name(0), f"{base:020d}.tagindex")


def overwrite(path: str, data: bytes) -> None:
    pathlib.Path(path).write_bytes(data)


def read_bytes(path: str) -> bytes:
    return pathlib.Path(path).read_bytes()


async def drain(consumer: adiskq.Consumer) -> list[adiskq.Message]:
    with anyio.fail_after(10):
        return [message async for message in consumer]


async def write(stream_path: str, count: int, *, single: int = 0, **options: object) -> list[str | None]:
    """``count`` messages in batches, then ``single`` single pushes; every fifth has no tag."""
    tags: list[str | None] = [None if i % 5 == 4 else TAG_CYCLE[i % 20] for i in range(count + single)]
    async with adiskq.Producer(stream_path, **options) as producer:  # type: ignore[arg-type]
        for start in range(0, count, 97):
            await producer.push_many(
                [adiskq.Record(b"v%d" % i, key="k", tag=tags[i]) for i in range(start, min(count, start + 97))]
            )
        for i in range(count, count + single):
            await producer.push(b"v%d" % i, key="k", tag=tags[i])
    return tags


async def test_a_tag_is_pushed_and_read_back(stream_path: str) -> None:
    """push(tag=) and Record(tag=) store the tag; every reader gives it back in Message.tag."""
    async with adiskq.Producer(stream_path) as producer:
        await producer.push(b"a", tag="created")
        await producer.push(b"b")
        await producer.push_many([adiskq.Record(b"c", tag="paid"), b"d"])
    async with adiskq.Consumer(stream_path, end="close") as consumer:
        assert [m.tag for m in await drain(consumer)] == ["created", None, "paid", None]
    assert adiskq.read(stream_path, 0, 2).tag == "paid"


@pytest.mark.parametrize("tag", ["", "x" * 256, b"bytes", 5])
async def test_a_bad_tag_is_refused_and_nothing_is_written(stream_path: str, tag: object) -> None:
    """An empty, too long or non-str tag fails the push with a clear error, writing nothing."""
    async with adiskq.Producer(stream_path) as producer:
        with pytest.raises((adiskq.InvalidArgumentError, TypeError), match="tag"):
            await producer.push(b"v", tag=tag)  # type: ignore[arg-type]
        with pytest.raises((adiskq.InvalidArgumentError, TypeError), match="tag"):
            await producer.push_many([adiskq.Record(b"ok"), adiskq.Record(b"v", tag=tag)])  # type: ignore[arg-type]
    assert adiskq.stats(stream_path).message_count == 0


@pytest.mark.parametrize("single", [0, 300], ids=["batches", "with-single-pushes"])
async def test_a_filtered_consumer_delivers_exactly_the_wanted_tags_in_order(stream_path: str, single: int) -> None:
    """tags={...} delivers every message with one of the tags, in offset order, across sealed segments
    and the active one (whose column may lag behind single pushes), and nothing else."""
    tags = await write(stream_path, 2000, single=single, segment_size_bytes=16 * 1024)
    wanted = {"t3", "t7"}
    async with adiskq.Consumer(stream_path, end="close", tags=wanted) as consumer:
        got = await drain(consumer)
    assert [m.offset for m in got] == [i for i, tag in enumerate(tags) if tag in wanted]
    assert all(m.value == b"v%d" % m.offset and m.tag in wanted for m in got)


async def test_when_every_message_is_wanted_all_are_delivered(stream_path: str) -> None:
    """At 100% selectivity (one tag on every message, the column compared whole) nothing is lost."""
    async with adiskq.Producer(stream_path, segment_size_bytes=16 * 1024) as producer:
        await producer.push_many([adiskq.Record(b"v%d" % i, tag="all") for i in range(1500)])
        for i in range(1500, 1520):
            await producer.push(b"v%d" % i, tag="all")
    async with adiskq.Consumer(stream_path, end="close", tags={"all"}) as consumer:
        got = await drain(consumer)
    assert [m.value for m in got] == [b"v%d" % i for i in range(1520)]


async def test_batches_filter_too(stream_path: str) -> None:
    """batches() of a filtered consumer hold only wanted messages."""
    tags = await write(stream_path, 500)
    async with adiskq.Consumer(stream_path, end="close", tags={"t1"}) as consumer:
        with anyio.fail_after(10):
            got = [m async for batch in consumer.batches(max_messages=7) for m in batch]
    assert [m.offset for m in got] == [i for i, tag in enumerate(tags) if tag == "t1"]


async def test_two_tags_with_one_hash_never_deliver_each_other(stream_path: str) -> None:
    """A hash collision (every entry of the column forced to the wanted tag's hash) only costs reads:
    each candidate's tag is confirmed from its record."""
    tags = await write(stream_path, 300)
    forced = struct.pack("<I", tags_format.tag_hash("t2")) * len(tags)
    overwrite(tag_file(stream_path), forced)
    async with adiskq.Consumer(stream_path, end="close", tags={"t2"}) as consumer:
        got = await drain(consumer)
    assert [m.offset for m in got] == [i for i, tag in enumerate(tags) if tag == "t2"]


async def test_a_collision_in_a_sparse_column_is_caught_from_the_record(stream_path: str) -> None:
    """A rare tag's entries read one by one (mapped, in sealed segments) are confirmed too: entries of
    another tag forced to the wanted hash deliver nothing."""
    tags = await write(stream_path, 2000, segment_size_bytes=16 * 1024)
    wanted_hash = struct.pack("<I", tags_format.tag_hash("t2"))
    other_hash = struct.pack("<I", tags_format.tag_hash("t3"))
    folder = os.path.dirname(tag_file(stream_path))
    for name in os.listdir(folder):
        if name.endswith(".tagindex"):
            path = os.path.join(folder, name)
            overwrite(path, read_bytes(path).replace(other_hash, wanted_hash))
    async with adiskq.Consumer(stream_path, end="close", tags={"t2"}) as consumer:
        got = await drain(consumer)
    assert [m.offset for m in got] == [i for i, tag in enumerate(tags) if tag == "t2"]


async def test_a_damaged_record_a_filter_selects_raises_with_its_place(stream_path: str) -> None:
    """A damaged record among the candidates raises CorruptRecordError naming the file and offset."""
    await write(stream_path, 2000, segment_size_bytes=16 * 1024)
    async with adiskq.Consumer(stream_path, end="close", tags={"t0"}) as consumer:
        first = (await drain(consumer))[0]
    data = tag_file(stream_path).replace(".tagindex", ".data")
    damaged = bytearray(read_bytes(data))
    position = 0
    for _ in range(first.offset):
        position += int.from_bytes(damaged[position : position + 4], "little")
    damaged[position + 30] ^= 0xFF
    overwrite(data, bytes(damaged))
    async with adiskq.Consumer(stream_path, end="close", tags={"t0"}) as consumer:
        with pytest.raises(adiskq.CorruptRecordError) as caught:
            await drain(consumer)
    assert caught.value.path == data


async def test_a_segment_without_a_tag_column_is_filtered_from_its_records(stream_path: str) -> None:
    """A segment written before tags (no .tagindex) is filtered by reading its records' tags."""
    tags = await write(stream_path, 300)
    os.unlink(tag_file(stream_path))
    async with adiskq.Consumer(stream_path, end="close", tags={"t4"}) as consumer:
        got = await drain(consumer)
    assert [m.offset for m in got] == [i for i, tag in enumerate(tags) if tag == "t4"]


async def test_an_end_offset_bounds_what_a_filtered_consumer_looks_at(stream_path: str) -> None:
    """end=N stops a filtered consumer before offset N, whatever lies after it."""
    tags = await write(stream_path, 400)
    async with adiskq.Consumer(stream_path, end=250, tags={"t0", "t5"}) as consumer:
        got = await drain(consumer)
    assert [m.offset for m in got] == [i for i, tag in enumerate(tags[:250]) if tag in {"t0", "t5"}]
    assert consumer.position == 250


async def test_a_long_stretch_without_a_match_is_read_in_steps(
    stream_path: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Past MAX_SCAN_OFFSETS offsets without a match the read lets other tasks run, then goes on."""
    monkeypatch.setattr(follower, "MAX_SCAN_OFFSETS", 50)
    monkeypatch.setattr(follower, "_SCAN_STEP", 10)
    async with adiskq.Producer(stream_path) as producer:
        await producer.push_many([adiskq.Record(b"x", tag="other") for _ in range(1000)])
        await producer.push(b"found", tag="rare")
    async with adiskq.Consumer(stream_path, end="close", tags={"rare"}) as consumer:
        got = await drain(consumer)
    assert [(m.offset, m.value) for m in got] == [(1000, b"found")]


async def test_a_waiting_filtered_consumer_gets_only_a_wanted_push(stream_path: str) -> None:
    """Following the producer, a filtered consumer skips unwanted pushes and wakes for a wanted one."""
    async with adiskq.Producer(stream_path) as producer:
        await producer.push(b"before", tag="other")
        async with adiskq.Consumer(stream_path, tags={"wanted"}) as consumer:
            received: list[adiskq.Message] = []
            arrived = anyio.Event()

            async def read_one() -> None:
                async for message in consumer:
                    received.append(message)
                    arrived.set()
                    return

            async with anyio.create_task_group() as tg:
                tg.start_soon(read_one)
                for i in range(50):
                    await producer.push(b"skip%d" % i, tag="other")
                assert not received
                await producer.push(b"yes", tag="wanted")
                with anyio.fail_after(10):
                    await arrived.wait()
    assert [(m.value, m.tag, m.offset) for m in received] == [(b"yes", "wanted", 51)]


@pytest.mark.parametrize(
    ("tags", "says"),
    [("created", "give a set of tags"), (set(), "at least one tag"), ({""}, "1 to 255 bytes"), ({5}, "a str")],
)
async def test_bad_tags_are_refused_at_construction(stream_path: str, tags: object, says: str) -> None:
    """tags= takes a collection of valid tags; a bare string, an empty set or a bad tag is refused."""
    with pytest.raises((adiskq.InvalidArgumentError, TypeError), match=says):
        adiskq.Consumer(stream_path, tags=tags)  # type: ignore[arg-type]


# -- consumer groups -------------------------------------------------------------------------------


async def write_partitions(stream_path: str, count: int) -> list[adiskq.Message]:
    """``count`` messages over 3 partitions, tags taking turns; what was written, as messages."""
    async with adiskq.Producer(stream_path, partitions=3) as producer:
        await producer.push_many(
            [adiskq.Record(b"v%d" % i, key=f"k{i % 7}", tag=TAG_CYCLE[i % 4]) for i in range(count)]
        )
    async with adiskq.ConsumerGroup(stream_path, end="close") as group:
        with anyio.fail_after(10):
            return [m async for m in group]


async def test_a_filtered_group_delivers_only_the_wanted_tags_of_every_partition(stream_path: str) -> None:
    """ConsumerGroup(tags=...) merges the partitions' wanted messages, in order within each."""
    everything = await write_partitions(stream_path, 600)
    async with adiskq.ConsumerGroup(stream_path, end="close", tags={"t1", "t2"}) as group:
        with anyio.fail_after(10):
            got = [m async for m in group]
    assert sorted(got) == sorted(m for m in everything if m.tag in {"t1", "t2"})
    for partition in range(3):
        offsets = [m.offset for m in got if m.partition == partition]
        assert offsets == sorted(offsets)


async def test_a_filtered_groups_commits_step_over_the_messages_it_skipped(stream_path: str) -> None:
    """Committing the last wanted message of a partition commits past the unwanted ones after it, so
    a filtered group that processed everything it wants shows no lag, and resumes at the end."""
    async with adiskq.Producer(stream_path) as producer:
        await producer.push_many([adiskq.Record(b"v%d" % i, tag="wanted" if i < 3 else "other") for i in range(100)])
    async with adiskq.ConsumerGroup(stream_path, "billing", end="close", tags={"wanted"}) as group:
        with anyio.fail_after(10):
            async for message in group:
                group.commit(message)
    assert group.committed == {0: 100}
    assert adiskq.stats(stream_path).groups["billing"] == {0: 100}
    async with adiskq.Producer(stream_path) as producer:
        await producer.push_many([adiskq.Record(b"late", tag="other"), adiskq.Record(b"new", tag="wanted")])
    async with adiskq.ConsumerGroup(stream_path, "billing", end="close", tags={"wanted"}) as group:
        with anyio.fail_after(10):
            got = [m async for m in group]
    assert [(m.offset, m.value) for m in got] == [(101, b"new")]


async def test_a_filtered_group_with_nothing_wanted_moves_its_commit_to_the_end(stream_path: str) -> None:
    """A filtered group whose delivered messages are all committed commits past the unwanted ones it read."""
    async with adiskq.Producer(stream_path) as producer:
        await producer.push(b"first", tag="wanted")
    async with adiskq.ConsumerGroup(stream_path, "audit", end="close", tags={"wanted"}) as group:
        with anyio.fail_after(10):
            async for message in group:
                group.commit(message)
    async with adiskq.Producer(stream_path) as producer:
        await producer.push_many([adiskq.Record(b"v", tag="other") for _ in range(50)])
    async with adiskq.ConsumerGroup(stream_path, "audit", end="close", tags={"wanted"}) as group:
        with anyio.fail_after(10):
            assert [m async for m in group] == []
    assert adiskq.stats(stream_path).groups["audit"] == {0: 51}


# -- lag of a filtered group -----------------------------------------------------------------------


def groups_json(stream_path: str) -> dict[str, Any]:
    result = invoke("groups", "--json", stream_path)
    assert result.exit_code == 0, result.output
    document: dict[str, Any] = json.loads(result.output)
    return document


def stats_json(stream_path: str) -> dict[str, Any]:
    result = invoke("stats", "--json", stream_path)
    assert result.exit_code == 0, result.output
    document: dict[str, Any] = json.loads(result.output)
    return document


async def read_some(stream_path: str, name: str, count: int, tags: set[str] | None) -> list[adiskq.Message]:
    """The first ``count`` messages a named group with these tags delivers, committed."""
    return await read_and_commit(stream_path, name, count, end="close", tags=tags)


async def test_the_lag_of_a_filtered_group_counts_only_the_wanted_messages_left(stream_path: str) -> None:
    """adiskq groups and stats: a group opened with tags lags by the messages of those tags it has
    not read yet, in every partition (the stored tags come with it), not by everything past its commit."""
    everything = await write_partitions(stream_path, 600)
    await read_some(stream_path, "billing", 40, {"t1", "t2"})
    committed = adiskq.stats(stream_path).groups["billing"]
    wanted = [m for m in everything if m.tag in {"t1", "t2"}]
    expected = {str(p): sum(1 for m in wanted if m.partition == p and m.offset >= c) for p, c in committed.items()}
    unfiltered = {
        str(p): sum(1 for m in everything if m.partition == p and m.offset >= c) for p, c in committed.items()
    }
    assert all(expected[p] < unfiltered[p] for p in expected)
    document = groups_json(stream_path)["billing"]
    assert document["tags"] == ["t1", "t2"]
    assert document["lag"] == expected
    assert document["total_lag"] == sum(expected.values())
    assert stats_json(stream_path)["groups"]["billing"]["lag"] == expected
    # Reading everything wanted leaves no lag, whatever of the other tags is left.
    await read_some(stream_path, "billing", 10_000, {"t1", "t2"})
    assert groups_json(stream_path)["billing"]["total_lag"] == 0


async def test_the_lag_of_a_filtered_group_never_counts_another_tag_with_its_hash(stream_path: str) -> None:
    """Two tags with one hash: the lag confirms each candidate's tag from its record."""
    tags = await write(stream_path, 300, single=20)
    forced = read_bytes(tag_file(stream_path)).replace(
        struct.pack("<I", tags_format.tag_hash("t3")), struct.pack("<I", tags_format.tag_hash("t2"))
    )
    overwrite(tag_file(stream_path), forced)
    got = await read_some(stream_path, "audit", 2, {"t2"})
    assert [m.tag for m in got] == ["t2", "t2"]
    left = sum(1 for i, tag in enumerate(tags) if tag == "t2" and i > got[-1].offset)
    assert groups_json(stream_path)["audit"]["lag"] == {"0": left}


async def test_a_group_reopened_without_tags_lags_by_every_message_again(stream_path: str) -> None:
    """The stored tags follow the group's last open: without tags, lag counts every message left."""
    tags = await write(stream_path, 100)
    got = await read_some(stream_path, "audit", 1, {"t1"})
    assert groups_json(stream_path)["audit"]["lag"] == {"0": tags.count("t1") - 1}
    await read_some(stream_path, "audit", 1, None)
    offset = adiskq.stats(stream_path).groups["audit"][0]
    assert offset == got[0].offset + 2
    document = groups_json(stream_path)["audit"]
    assert document["tags"] is None
    assert document["lag"] == {"0": len(tags) - offset}
