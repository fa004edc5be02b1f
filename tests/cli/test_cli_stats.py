"""`adiskq stats`: partitions, owner, groups and the last recovery, as tables or JSON."""

from __future__ import annotations

import json
import os
import re

from support.cli import append, fill, invoke, producer_open, segment_files

import adiskq
from adiskq._storage.offsets import save_offsets

T0 = 1_767_225_600_000_000_000  # 2026-01-01T00:00:00Z


def row(output: str, partition: int) -> list[str]:
    """The cells of one partition's row of the table (split on runs of spaces)."""
    for line in output.splitlines():
        cells = re.split(r"\s{2,}", line.strip())
        if cells and cells[0] == str(partition):
            return cells
    raise AssertionError(f"no row for partition {partition} in:\n{output}")


def test_the_table_has_a_row_per_partition(stream_path: str) -> None:
    """Each partition: oldest and newest offsets, messages, segments, size, oldest and newest times."""
    fill(
        stream_path,
        [adiskq.Record(b"v%d" % i, key="aaa", timestamp=T0 + i * 1_000_000) for i in range(5)],
        partitions=2,
    )
    result = invoke("stats", stream_path)
    assert result.exit_code == 0
    size = adiskq.stats(stream_path).partitions[0].size_bytes
    assert row(result.stdout, 0) == [
        "0",
        "0",
        "4",
        "5",
        "1",
        f"{size} B",
        "2026-01-01 00:00:00.000",
        "2026-01-01 00:00:00.004",
    ]
    assert row(result.stdout, 1) == ["1", "-", "-", "0", "1", "0 B", "-", "-"]
    assert "5 messages in 2 partitions" in result.stdout


def test_no_owner_no_groups_are_said_plainly(stream_path: str) -> None:
    """A closed stream without groups says so."""
    fill(stream_path, [b"x"])
    output = invoke("stats", stream_path).stdout
    assert "owner: none (no producer has the stream open)" in output
    assert "groups: none" in output
    assert "nothing to repair" in output


def test_the_owner_is_shown_while_a_producer_has_the_stream_open(stream_path: str) -> None:
    """While a producer holds the lock, stats names its pid and host."""
    fill(stream_path, [b"x"])
    with producer_open(stream_path):
        output = invoke("stats", stream_path).stdout
    assert f"owner: a producer is writing: pid {os.getpid()} on host" in output


def test_groups_show_committed_offsets_and_lag(stream_path: str) -> None:
    """Each named group: its committed offsets and how many messages it has still to read."""
    fill(stream_path, [adiskq.Record(b"x", key="aaa") for _ in range(10)], partitions=3)
    save_offsets(stream_path, "billing", {0: 4})
    output = invoke("stats", stream_path).stdout
    billing = next(line for line in output.splitlines() if line.startswith("billing"))
    assert re.split(r"\s{2,}", billing.strip()) == ["billing", "0:4", "6", "none running"]


def test_the_last_recovery_lists_its_repairs(stream_path: str) -> None:
    """After a producer open cut a torn tail, stats says what was cut and where."""
    fill(stream_path, [b"x"])
    append(segment_files(stream_path, 0, "data")[-1], b"\x40\x00\x00\x00torn")
    fill(stream_path, [])
    output = invoke("stats", stream_path).stdout
    assert "last recovery:" in output
    assert "1 repairs:" in output
    assert "partition 0 segment 00000000000000000000: cut 8 bytes of torn tail" in output


def test_json_is_for_machines(stream_path: str) -> None:
    """`--json` gives the same facts as plain JSON, times in ISO-8601 and nanoseconds."""
    fill(stream_path, [adiskq.Record(b"x", key="aaa", timestamp=T0)], partitions=2)
    save_offsets(stream_path, "billing", {0: 0})
    document = json.loads(invoke("stats", stream_path, "--json").stdout)
    assert document["messages"] == 1
    assert document["owner"] is None
    first = document["partitions"][0]
    assert (first["partition"], first["oldest_offset"], first["next_offset"], first["messages"]) == (0, 0, 1, 1)
    assert first["oldest_timestamp"] == "2026-01-01T00:00:00.000000000Z"
    assert first["oldest_timestamp_ns"] == T0
    assert document["partitions"][1]["newest_timestamp"] is None
    assert document["groups"] == {
        "billing": {"committed": {"0": 0}, "lag": {"0": 1}, "total_lag": 1, "members": [], "tags": None}
    }
    assert document["last_recovery"]["repairs"] == []


def test_json_names_the_owner(stream_path: str) -> None:
    """The owner's pid and host are in the JSON while a producer has the stream open."""
    fill(stream_path, [b"x"])
    with producer_open(stream_path):
        document = json.loads(invoke("stats", stream_path, "--json").stdout)
    assert document["owner"]["pid"] == os.getpid()


def test_a_damaged_group_file_does_not_hide_the_partitions(stream_path: str) -> None:
    """Stats still shows the stream when one group's offsets are unreadable, warns, and exits 1."""
    fill(stream_path, [b"x"])
    save_offsets(stream_path, "billing", {0: 1})
    save_offsets(stream_path, "audit", {0: 0})
    with open(os.path.join(stream_path, "groups", "billing", "offsets.json"), "w") as file:
        file.write("{broken")
    result = invoke("stats", stream_path)
    assert result.exit_code == 1
    assert row(result.stdout, 0)[:4] == ["0", "0", "0", "1"]
    assert "audit" in result.stdout
    assert "warning: group billing:" in result.stderr
    assert "offsets.json is not valid JSON" in result.stderr
    document = json.loads(invoke("stats", stream_path, "--json").stdout)
    assert list(document["groups"]) == ["audit"]
    assert "billing" in document["broken_groups"]
