"""franz-go (a Kafka client written in Go from Kafka's own protocol) sees the gateway as it sees
Apache Kafka: ``franz/main.go`` runs one scenario — an idempotent producer's records with keys, nulls,
headers and timestamps, read back; ListOffsets; a group member's commit with metadata and leader
epoch, read back — against both (differential.py), and the two JSON documents it prints are compared.

The program is built once per test module with the machine's Go from the module proxy, at the
versions its go.mod and go.sum pin.
"""

from __future__ import annotations

import json
import os
import pathlib
import shutil
import subprocess
from typing import Any

import pytest
from differential import Differential, Side

SOURCE = pathlib.Path(__file__).resolve().parent / "franz"


@pytest.fixture(scope="module")
def franz_client(tmp_path_factory: pytest.TempPathFactory) -> pathlib.Path:
    """The scenario program, built (``go build``, module downloads verified against go.sum)."""
    go = shutil.which("go")
    if go is None:
        pytest.fail("no Go toolchain to build the franz-go client (tests/kafka/franz needs the go of its go.mod)")
    program = tmp_path_factory.mktemp("franz") / "franzclient"
    done = subprocess.run(
        [go, "build", "-mod=readonly", "-o", str(program), "."],
        cwd=SOURCE,
        capture_output=True,
        text=True,
        timeout=540,
        env={**os.environ, "GOFLAGS": "-buildvcs=false"},
    )
    assert done.returncode == 0, f"go build of tests/kafka/franz failed:\n{done.stderr}"
    return program


def run(program: pathlib.Path, side: Side) -> dict[str, Any]:
    """What franz-go observed of ``side``."""
    done = subprocess.run(
        [str(program), side.bootstrap, side.name(), side.name("g")], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, f"the franz-go client failed against {side.kind}:\n{done.stderr}"
    observed: dict[str, Any] = json.loads(done.stdout)
    return observed


def test_franz_go_sees_the_same(differential: Differential, franz_client: pathlib.Path) -> None:
    """Every field franz-go observed is the same on both sides: produce answers, records (keys, null
    key and value, empty ones, headers, timestamps), ListOffsets answers, the group's reads, its
    member's commit with the records' leader epoch, and the commit with metadata made from outside."""
    differential.compare(lambda side: run(franz_client, side))
