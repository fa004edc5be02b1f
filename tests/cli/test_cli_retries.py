"""`adiskq retries` shows a group's pending retries; `adiskq dead-letters` lists and hands back its dead letters."""

from __future__ import annotations

import json

import anyio
import pytest
from support.cli import fill, invoke

import adiskq

NAME = "billing"


@pytest.fixture
def stream(stream_path: str) -> str:
    """Three messages; group billing retried the first (due in an hour), dead-lettered the second,
    committed the third."""

    async def setup() -> None:
        async with adiskq.Producer(stream_path) as producer:
            for value in (b"later", b"bad", b"fine"):
                await producer.push(value, key="k", headers={"type": b"order"})
        async with adiskq.ConsumerGroup(stream_path, NAME) as group:
            messages = []
            with anyio.fail_after(10):
                async for message in group:
                    messages.append(message)
                    if len(messages) == 3:
                        break
            later, bad, fine = messages
            await group.retry(later, delay=3600, reason="payment service down")
            await group.dead_letter(bad, reason="cannot parse")
            group.commit(fine)

    anyio.run(setup)
    return stream_path


def test_retries_shows_what_waits_and_counts_the_dead_letters(stream: str) -> None:
    """The pending retry is listed with its place, attempt, due time and reason; dead letters are counted."""
    document = json.loads(invoke("retries", stream, "--group", NAME, "--json").output)
    [pending] = document["pending"]
    assert (pending["partition"], pending["offset"], pending["attempt"], pending["reason"]) == (
        0,
        0,
        2,
        "payment service down",
    )
    assert document["dead_letters"] == 1
    table = invoke("retries", stream, "--group", NAME).output
    assert "payment service down" in table
    assert "dead letters: 1" in table


def test_dead_letters_are_listed_and_handed_back_once(stream: str) -> None:
    """--redrive pushes each dead letter to the stream again, without adiskq's headers, and only once."""
    [letter] = json.loads(invoke("dead-letters", stream, "--group", NAME, "--json").output)
    assert (letter["offset"], letter["reason"], letter["handed_back"]) == (1, "cannot parse", False)
    assert "handed 1 dead letters" in invoke("dead-letters", stream, "--group", NAME, "--redrive").output
    assert "handed 0 dead letters" in invoke("dead-letters", stream, "--group", NAME, "--redrive").output
    [letter] = json.loads(invoke("dead-letters", stream, "--group", NAME, "--json").output)
    assert letter["handed_back"] is True
    again = adiskq.read(stream, 0, 3)
    assert (again.value, again.key, dict(again.headers), again.attempt) == (b"bad", b"k", {"type": b"order"}, 1)
    assert adiskq.stats(stream).partitions[0].next_offset == 4


def test_a_group_without_retries_says_so(stream_path: str) -> None:
    """A group that never retried has no pending retries and no dead letters."""
    fill(stream_path, [adiskq.Record(b"m")])

    async def open_once() -> None:
        async with adiskq.ConsumerGroup(stream_path, NAME):
            pass

    anyio.run(open_once)
    assert "has no pending retries" in invoke("retries", stream_path, "--group", NAME).output
    assert "has no dead letters" in invoke("dead-letters", stream_path, "--group", NAME).output


@pytest.mark.parametrize("command", ["retries", "dead-letters"])
def test_help_shows_no_markup(command: str) -> None:
    """The commands' help is plain text: no reStructuredText double backticks."""
    result = invoke(command, "--help")
    assert result.exit_code == 0
    assert "``" not in result.output


@pytest.mark.parametrize("command", ["retries", "dead-letters"])
def test_a_group_that_does_not_exist_is_a_usage_error(stream: str, command: str) -> None:
    """A --group the stream does not have (a typo) fails with status 2, listing the groups it has."""
    result = invoke(command, stream, "--group", "biling")
    assert result.exit_code == 2, result.output
    assert "no group 'biling'" in result.output
    assert NAME in result.output
