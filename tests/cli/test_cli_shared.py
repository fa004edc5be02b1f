"""The command line beside shared producers: `write --shared`, `stats` listing writers, `vacuum`,
`check --repair` refusing, and the error that says to pass --shared."""

from __future__ import annotations

import json
import os

from support.cli import invoke, run
from support.stopped import stopped_holder

import adiskq
from adiskq._sansio.codec import encode_record
from adiskq._storage.stream import StreamWriter


def test_write_shared_appends_beside_a_live_shared_producer(stream_path: str) -> None:
    """`adiskq write --shared` writes while a service's shared producer is open."""
    live = StreamWriter.open(stream_path, partitions=1, shared=True)
    try:
        result = invoke("write", stream_path, "--shared", input=b"one\ntwo\n")
    finally:
        live.close()
    assert result.exit_code == 0, result.output
    assert [adiskq.read(stream_path, 0, offset).value for offset in range(2)] == [b"one", b"two"]


def test_write_without_shared_says_to_pass_it(stream_path: str) -> None:
    """Beside shared producers, a plain `write` fails naming them and saying to pass --shared."""
    live = StreamWriter.open(stream_path, partitions=1, shared=True)
    try:
        result = invoke("write", stream_path, input=b"one\n")
    finally:
        live.close()
    assert result.exit_code != 0
    assert "--shared" in result.stderr
    assert f"pid {os.getpid()}" in result.stderr


def test_stats_lists_the_shared_writers(stream_path: str) -> None:
    """`adiskq stats` (and its JSON) lists every open writer, shared or not."""
    a = StreamWriter.open(stream_path, partitions=1, shared=True)
    b = StreamWriter.open(stream_path, shared=True)
    try:
        table = invoke("stats", stream_path)
        as_json = json.loads(invoke("stats", stream_path, "--json").stdout)
    finally:
        a.close()
        b.close()
    assert "2 shared producers writing" in table.stdout
    assert [w["shared"] for w in as_json["writers"]] == [True, True]
    assert {w["pid"] for w in as_json["writers"]} == {os.getpid()}


def test_vacuum_runs_beside_shared_producers(stream_path: str) -> None:
    """`adiskq vacuum` joins shared producers as one of them and deletes what the retention says."""
    live = StreamWriter.open(stream_path, partitions=1, segment_size_bytes=1024, shared=True)
    try:
        for i in range(100):
            with live.appending([0]):
                live.partitions[0].append([encode_record(b"v%03d" % i, b"k", 1)], [1])
        result = invoke("vacuum", stream_path, "--max-bytes", "2048")
        with live.appending([0]):  # the live producer writes on after the vacuum
            live.partitions[0].append([encode_record(b"after", b"k", 1)], [1])
    finally:
        live.close()
    assert result.exit_code == 0, result.output
    assert "removed" in result.stdout
    partition = adiskq.stats(stream_path).partitions[0]
    assert partition.oldest_offset > 0
    assert adiskq.read(stream_path, 0, 100).value == b"after"


def test_check_says_shared_producers_are_writing(stream_path: str) -> None:
    """`adiskq check` beside a shared producer names it (its unindexed tail is live, not torn)."""
    live = StreamWriter.open(stream_path, partitions=1, shared=True)
    try:
        result = invoke("check", stream_path)
    finally:
        live.close()
    assert result.exit_code == 0, result.output
    assert f"a producer is writing (pid {os.getpid()}" in result.stdout


def test_write_shared_beside_a_stopped_producer_fails_after_lock_timeout(stream_path: str) -> None:
    """`adiskq write --shared --lock-timeout 1` beside a stopped producer that holds the partition's
    lock exits with an error naming it (pid, stopped) instead of hanging, and writes nothing."""
    StreamWriter.open(stream_path, partitions=1, shared=True).close()
    with stopped_holder(stream_path, "partition-0") as holder:
        result = run("write", stream_path, "--shared", "--lock-timeout", "1", input=b"one\n")
    assert result.returncode == 1, result.stderr
    assert f"pid {holder.pid} on host" in result.stderr
    assert "(stopped)" in result.stderr
    assert adiskq.stats(stream_path).partitions[0].next_offset == 0


def test_write_shared_does_not_claim_a_run_of_offsets_it_shares_with_another_writer() -> None:
    """Offsets that interleave with another writer's are not printed as one run `first..last`."""
    from adiskq._sansio.values import Receipt
    from adiskq.cli.write import Tally

    tally = Tally()
    tally.add([Receipt(0, 0), Receipt(0, 2), Receipt(0, 5), Receipt(1, 7), Receipt(1, 8)])
    described = tally.describe("orders")
    assert "0..5" not in described
    assert "partition 0: 3 offsets from 0 to 5, between other writers'" in described
    assert "partition 1 offsets 7..8" in described
