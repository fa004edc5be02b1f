"""`adiskq upgrade`: the one step that moves a stream from an older format to adiskq/5.

A producer never moves a stream's format as a side effect of opening it: a reader of an older adiskq
that has the stream open would then misread the first tagged message as damage. This command
makes the move explicit, and refuses while it can see anything with the stream open.
"""

from __future__ import annotations

import json
import os

from support.cli import fill, invoke, producer_open

import adiskq
from adiskq._storage.leases import Membership
from adiskq._storage.stream import StreamWriter


def settings(path: str) -> dict[str, object]:
    with open(os.path.join(path, "settings.json")) as file:
        data = json.load(file)
    assert isinstance(data, dict)
    return data


def format_1_stream(path: str) -> dict[str, object]:
    """A stream of three untagged messages in format adiskq/1 (written before tags); its settings."""
    fill(path, [b"m0", b"m1", b"m2"])
    old = settings(path) | {"format": "adiskq/1"}
    with open(os.path.join(path, "settings.json"), "w") as file:
        json.dump(old, file)
    return old


def test_upgrade_moves_a_format_1_stream_to_format_5_and_keeps_everything_else(stream_path: str) -> None:
    """The format is all that changes: the settings, the messages and their offsets stay; a second
    run says there is nothing to do."""
    old = format_1_stream(stream_path)
    result = invoke("upgrade", stream_path)
    assert result.exit_code == 0, result.output
    assert result.stdout == (
        f"moved {stream_path} from format adiskq/1 to adiskq/5: its producers may now write tags, "
        "null header values and repeated header names\n"
    )
    assert settings(stream_path) == old | {"format": "adiskq/5"}
    assert [adiskq.read(stream_path, 0, offset).value for offset in range(3)] == [b"m0", b"m1", b"m2"]
    again = invoke("upgrade", stream_path)
    assert (again.exit_code, again.stdout) == (0, f"{stream_path} is in format adiskq/5 already: nothing to do\n")


def test_upgrade_is_refused_while_a_producer_has_the_stream_open(stream_path: str) -> None:
    """An open producer (exclusive or shared) is named, and the stream stays in format 1."""
    old = format_1_stream(stream_path)
    for shared in (False, True):
        writer = StreamWriter.open(stream_path, shared=shared)
        try:
            result = invoke("upgrade", stream_path)
        finally:
            writer.close()
        assert result.exit_code == 1
        line = result.stderr.strip()
        assert line.startswith(f"Error: stream {stream_path!r} is open in a producer (pid {os.getpid()} on host ")
        assert line.endswith("so it cannot be upgraded now: stop every producer of it, and run this again")
        assert settings(stream_path) == old
    with producer_open(stream_path):
        assert invoke("upgrade", stream_path).exit_code == 1


def test_upgrade_is_refused_while_a_consumer_group_member_has_the_stream_open(stream_path: str) -> None:
    """A live member of a consumer group is named with its group, and nothing moves."""
    old = format_1_stream(stream_path)
    member = Membership(os.path.realpath(stream_path), "billing")
    member.join()
    try:
        result = invoke("upgrade", stream_path)
    finally:
        member.leave()
    assert result.exit_code == 1
    assert result.stderr.strip().startswith(
        f"Error: stream {stream_path!r} is read by consumer group members now (group 'billing': pid {os.getpid()} "
    )
    assert settings(stream_path) == old
    assert invoke("upgrade", stream_path).exit_code == 0


def test_upgrade_of_a_missing_stream_creates_nothing(stream_path: str) -> None:
    """No stream at the path: an error, and no stream is created."""
    result = invoke("upgrade", stream_path)
    assert result.exit_code == 1
    assert "no adiskq stream at" in result.stderr
    assert not os.path.exists(stream_path)


def test_a_tag_on_a_format_1_stream_says_how_to_move_it_and_upgrade_lets_it_through(stream_path: str) -> None:
    """`write --tag` on a format-1 stream fails naming `adiskq upgrade PATH` and writes nothing; once
    upgraded, it writes the tagged messages."""
    format_1_stream(stream_path)
    result = invoke("write", stream_path, "--tag", "created", input=b"x\n")
    assert result.exit_code == 1
    assert "is in format 'adiskq/1', which has no tags" in result.stderr
    assert f"Move it to 'adiskq/5' with `adiskq upgrade {stream_path}`" in result.stderr
    assert adiskq.stats(stream_path).message_count == 3
    assert invoke("upgrade", stream_path).exit_code == 0
    assert invoke("write", stream_path, "--tag", "created", input=b"x\n").exit_code == 0
    assert adiskq.read(stream_path, 0, 3).tag == "created"
