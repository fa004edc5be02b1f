"""kcat (Debian's package, librdkafka inside) against the gateway: metadata, produce, consume."""

from __future__ import annotations

import json
import shutil
import subprocess

import pytest

KCAT = shutil.which("kcat")


def kcat(gateway, *args: str, stdin: bytes = b"") -> bytes:
    """Run kcat against the gateway; its stdout (a failure fails the test with its stderr)."""
    assert KCAT is not None, "kcat is not installed: apt-get install kcat (scripts/test does it)"
    done = subprocess.run([KCAT, "-b", gateway.bootstrap, *args], input=stdin, capture_output=True, timeout=60)
    assert done.returncode == 0, done.stderr.decode()
    return done.stdout


def test_produce_consume_with_keys(gateway, topic: str) -> None:
    """Lines produced with keys come back with their offsets, keys and values, then kcat exits at the end."""
    kcat(gateway, "-P", "-t", topic, "-K", ":", stdin=b"a:1\nb:2\nc:3\n")
    out = kcat(gateway, "-C", "-t", topic, "-e", "-o", "beginning", "-f", "%o %k %s\\n")
    assert out.decode().splitlines() == ["0 a 1", "1 b 2", "2 c 3"]


def test_metadata_json_lists_topic_and_broker(gateway, topic: str) -> None:
    """``kcat -L -J`` shows the one broker at the bound address and the topic it auto-created."""
    metadata = json.loads(kcat(gateway, "-L", "-J", "-t", topic))
    assert [(b["id"], b["name"]) for b in metadata["brokers"]] == [(0, gateway.bootstrap)]
    (described,) = metadata["topics"]
    assert described["topic"] == topic
    assert [p["partition"] for p in described["partitions"]] == [0]


@pytest.mark.parametrize("codec", ["gzip", "snappy", "lz4", "zstd"])
def test_compressed_produce(gateway, topic: str, codec: str) -> None:
    """kcat's compressed batches (``-z``) are read back whole."""
    lines = b"".join(b"line %d\n" % i for i in range(30))
    kcat(gateway, "-P", "-t", topic, "-z", codec, stdin=lines)
    out = kcat(gateway, "-C", "-t", topic, "-e", "-f", "%s\\n")
    assert out.splitlines() == lines.splitlines()
