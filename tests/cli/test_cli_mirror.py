"""`adiskq mirror` and `adiskq mirror status` against Apache Kafka (the suite's ``kafka_broker``), and
`adiskq upgrade --identity`: the commands a person types, their output and exit status."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys

from support.cli import fill, invoke, producer_open, run

from adiskq._storage.settings import load_settings


def test_a_stream_is_mirrored_to_kafka_and_back_and_its_status_shown(
    kafka_broker: object, tmp_path: os.PathLike[str]
) -> None:
    bootstrap = kafka_broker.bootstrap  # type: ignore[attr-defined]
    stream, back = os.path.join(tmp_path, "orders"), os.path.join(tmp_path, "back")
    url = f"kafka://{bootstrap}/cli-{os.path.basename(tmp_path)}"
    fill(stream, [b"m%d" % i for i in range(30)], partitions=3)

    shipped = run("mirror", stream, url, "--create-topic", "--once")
    assert shipped.returncode == 0, shipped.stderr
    assert f"shipped 30 messages from {stream} to {url}" in shipped.stderr
    status = run("mirror", "status", stream, url, "--json")
    assert status.returncode == 0, status.stderr
    found = json.loads(status.stdout)
    assert sum(row["position"] for row in found["partitions"].values()) == 30
    assert all(row["lag"] == 0 for row in found["partitions"].values())
    assert found["last_error"] is None

    copied = run("mirror", url, back, "--once")
    assert copied.returncode == 0, copied.stderr
    assert "shipped 30 messages" in copied.stderr
    table = run("mirror", "status", url, back)
    assert table.returncode == 0, table.stderr
    lines = table.stdout.splitlines()
    assert lines[0] == f"mirror {url} -> {back}"
    assert [line.split()[-1] for line in lines[2:5]] == ["0", "0", "0"]  # the lag of each partition
    assert "last error: none" in table.stdout


def test_a_following_mirror_stops_cleanly_on_sigterm(kafka_broker: object, tmp_path: os.PathLike[str]) -> None:
    bootstrap = kafka_broker.bootstrap  # type: ignore[attr-defined]
    stream = os.path.join(tmp_path, "s")
    fill(stream, [b"a", b"b"])
    command = [
        sys.executable,
        "-m",
        "adiskq",
        "mirror",
        stream,
        f"kafka://{bootstrap}/sig-{os.path.basename(tmp_path)}",
    ]
    process = subprocess.Popen([*command, "--create-topic"], stderr=subprocess.PIPE, text=True)
    assert process.stderr is not None
    with process.stderr:
        while not (line := process.stderr.readline()).startswith("mirroring"):
            assert line, "the mirror ended before it started shipping"
        process.send_signal(signal.SIGTERM)
        assert process.wait(60) == 0
        first = re.search(r"^shipped (\d) messages", process.stderr.read(), re.MULTILINE)
    assert first is not None
    rest = run("mirror", *command[4:], "--once")  # the rest, and nothing twice
    second = re.search(r"^shipped (\d) messages", rest.stderr, re.MULTILINE)
    assert second is not None, rest.stderr
    assert int(first.group(1)) + int(second.group(1)) == 2


def test_mistakes_get_one_line_saying_what_to_do(kafka_broker: object, tmp_path: os.PathLike[str]) -> None:
    bootstrap = kafka_broker.bootstrap  # type: ignore[attr-defined]
    stream = os.path.join(tmp_path, "s")
    fill(stream, [b"a"])
    for args, message in [
        ((stream, f"kafka://alice:secret@{bootstrap}/t"), "holds credentials"),
        ((stream, f"kafka://{bootstrap}/no-such-topic-{os.path.basename(tmp_path)}"), "--create-topic"),
        ((stream, stream), "exactly one end must be a Kafka topic"),
        ((stream,), "give SRC and DST"),
    ]:
        result = run("mirror", *args, "--once")
        assert result.returncode in (1, 2), result
        assert message in result.stderr, result.stderr


def test_upgrade_gives_an_identity_once_and_not_while_a_producer_writes(stream_path: str) -> None:
    fill(stream_path, [b"m0"])
    with producer_open(stream_path):
        refused = invoke("upgrade", stream_path, "--identity")
        assert refused.exit_code == 1
        assert "is open in a producer" in refused.output
    given = invoke("upgrade", stream_path, "--identity")
    assert given.exit_code == 0, given.output
    settings = load_settings(stream_path)
    assert settings is not None
    assert settings.stream_id is not None
    assert given.output == f"gave {stream_path} the identity {settings.stream_id} (format adiskq/5)\n"
    again = invoke("upgrade", stream_path, "--identity")
    assert again.output == f"{stream_path} has its identity already: {settings.stream_id}\n"
