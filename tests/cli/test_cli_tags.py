"""Tags at the command line: `write --tag`, `read --tag` (repeatable, with --follow and --group too),
`find --tag`, and the tag in every output format that shows more than values."""

from __future__ import annotations

import glob
import json
import os
import zlib

import anyio
import pytest
from support.cli import invoke

import adiskq
from adiskq.cli.formats import json_line, message_json


def lines(output: str) -> list[dict[str, object]]:
    return [json.loads(line) for line in output.splitlines()]


@pytest.fixture
def tagged(stream_path: str) -> str:
    """Six messages on two partitions: tags created, paid and none in turn."""

    async def push() -> None:
        async with adiskq.Producer(stream_path, partitions=2) as producer:
            for i, tag in enumerate(["created", "paid", None] * 2):
                await producer.push(b"m%d" % i, key=f"k{i % 2}", tag=tag, timestamp=1_000 + i)

    anyio.run(push)
    return stream_path


def test_write_tags_every_message(stream_path: str) -> None:
    """`write --tag T` gives every message it writes the tag T."""
    assert invoke("write", stream_path, "--tag", "created", input=b"a\nb\n").exit_code == 0
    assert [m["tag"] for m in lines(invoke("read", stream_path).output)] == ["created", "created"]


@pytest.mark.parametrize("bad", ["", "x" * 256])
def test_a_bad_tag_is_refused_before_anything_is_written(stream_path: str, bad: str) -> None:
    """An empty or too long tag is a usage error naming --tag; nothing is written."""
    result = invoke("write", stream_path, "--tag", bad, input=b"a\n")
    assert result.exit_code == 2
    assert "--tag" in result.output
    assert "1 to 255 bytes" in result.output
    assert invoke("read", stream_path, "--tag", bad).exit_code == 2


def test_read_with_tags_prints_only_those(tagged: str) -> None:
    """`read --tag A --tag B` prints the messages with either tag, partitions merged by time."""
    result = invoke("read", tagged, "--tag", "created", "--tag", "paid")
    assert [(m["value"], m["tag"]) for m in lines(result.output)] == [
        ("m0", "created"),
        ("m1", "paid"),
        ("m3", "created"),
        ("m4", "paid"),
    ]


def test_read_with_a_tag_follows_and_reads_as_a_group(tagged: str) -> None:
    """--tag works with --follow (stopped by --limit) and with --group, which commits what it printed."""
    followed = invoke("read", tagged, "--tag", "paid", "--follow", "--limit", "2")
    assert sorted(m["value"] for m in lines(followed.output)) == ["m1", "m4"]
    grouped = invoke("read", tagged, "--tag", "created", "--group", "billing")
    assert sorted(m["value"] for m in lines(grouped.output)) == ["m0", "m3"]
    assert invoke("read", tagged, "--tag", "created", "--group", "billing").output == ""


def test_find_with_a_tag(tagged: str) -> None:
    """`find --key K --tag T` prints the key's messages with that tag."""
    result = invoke("find", tagged, "--key", "k0", "--tag", "created")
    assert [(m["value"], m["key"]) for m in lines(result.output)] == [("m0", "k0")]
    assert adiskq.find(tagged, "k1", tags={"paid", "created"}) == [
        m for m in adiskq.find(tagged, "k1") if m.tag in ("paid", "created")
    ]


def test_the_tag_is_in_json_and_pretty_output_and_only_when_there(tagged: str) -> None:
    """json carries "tag" for a tagged message (and no key for one without); pretty shows it."""
    message = adiskq.read(tagged, 0, 0)
    assert message_json(message)["tag"] == message.tag
    assert json.loads(json_line(message)) == message_json(message)
    untagged = message._replace(tag=None)
    assert "tag" not in message_json(untagged)
    assert json.loads(json_line(untagged)) == message_json(untagged)
    assert f"tag {message.tag}" in invoke("read", tagged, "--format", "pretty").output


def test_stats_counts_messages_per_tag(tagged: str) -> None:
    """`stats --tags` counts each tag's messages from the tag column (and says what it could not count)."""
    document = json.loads(invoke("stats", tagged, "--tags", "--json").output)
    assert {entry["tag"]: entry["messages"] for entry in document["tags"]} == {"created": 2, "paid": 2, None: 2}
    assert document["tags_uncounted"] == 0
    table = invoke("stats", tagged, "--tags").output
    assert "created" in table
    assert "(none)" in table
    assert "tags" not in json.loads(invoke("stats", tagged, "--json").output)  # only when asked: it reads more


def test_stats_says_what_a_segment_without_a_column_leaves_uncounted(tagged: str) -> None:
    """Messages of a segment written before tags are reported as not counted, not as untagged."""
    for path in glob.glob(os.path.join(tagged, "parts", "000000", "*.tagindex")):
        os.unlink(path)
    document = json.loads(invoke("stats", tagged, "--tags", "--json").output)
    assert document["tags_uncounted"] == adiskq.stats(tagged).partitions[0].message_count


def test_stats_counts_two_tags_that_share_a_hash_each_as_it_is(stream_path: str) -> None:
    """Two tags with one CRC-32 (the .tagindex hash) are counted from their records, each exactly,
    over rolled segments, and a segment whose first message of the hash is the other tag too."""
    first, second = "tag29685295", "tag32060020"
    assert zlib.crc32(first.encode()) == zlib.crc32(second.encode())
    order = [second, first, first, None, second] * 30 + [first] * 7

    async def push() -> None:
        async with adiskq.Producer(stream_path, segment_size_bytes=1024) as producer:
            for i, tag in enumerate(order):
                await producer.push(b"v%d" % i, key="k", tag=tag)

    anyio.run(push)
    document = json.loads(invoke("stats", stream_path, "--tags", "--json").output)
    counted = {entry["tag"]: entry["messages"] for entry in document["tags"]}
    assert counted == {first: order.count(first), second: order.count(second), None: order.count(None)}
    assert document["tags_uncounted"] == 0


def test_stats_reports_a_damaged_tagged_record_as_not_counted(stream_path: str) -> None:
    """A tagged record whose bytes rotted is not counted under any tag: it is reported as not
    counted, and every other message is counted under its own tag."""

    async def push() -> None:
        async with adiskq.Producer(stream_path) as producer:
            for i, tag in enumerate(["created", "paid", "created", "paid"]):
                await producer.push(b"value-%d" % i, key="k", tag=tag)

    anyio.run(push)
    third = adiskq.read(stream_path, 0, 2)
    assert third.tag == "created"
    (data,) = glob.glob(os.path.join(stream_path, "parts", "000000", "*.data"))
    with open(data, "r+b") as file:
        content = file.read()
        at = content.index(b"value-2")
        file.seek(at)
        file.write(b"VALUE-2")
    document = json.loads(invoke("stats", stream_path, "--tags", "--json").output)
    assert {entry["tag"]: entry["messages"] for entry in document["tags"]} == {"created": 1, "paid": 2}
    assert document["tags_uncounted"] == 1
