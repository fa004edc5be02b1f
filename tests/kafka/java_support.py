"""The Java Kafka client for the gateway's tests: its jars (cached by scripts/test), compiled and run.

The jars and their SHA-256 are pinned in ``tests/kafka/jars.txt``; ``scripts/fetch_kafka_jars.py``
fetches them from Maven Central into ``.cache/kafka/SET/``. A missing
jar or JDK fails the test with what to fetch or install: these tests never skip.
"""

from __future__ import annotations

import pathlib
import shutil
import subprocess

import pytest
from support.kafka_jars import class_path

JAVA_SOURCES = pathlib.Path(__file__).resolve().parent / "java"


def javac() -> str:
    """The JDK's compiler (a missing JDK fails the test saying what to install)."""
    found = shutil.which("javac")
    if found is None:
        pytest.fail("no JDK: apt-get install openjdk-17-jdk-headless (scripts/test does)")
    return found


def compile_client(version: str, into: pathlib.Path, program: str = "KafkaJavaClient") -> list[pathlib.Path]:
    """Compile ``java/PROGRAM.java`` against the client ``version`` into ``into``; the class path to
    run it with."""
    jars = class_path(f"clients-{version}")
    source = JAVA_SOURCES / f"{program}.java"
    done = subprocess.run(
        [javac(), "-d", str(into), "-cp", ":".join(map(str, jars)), str(source)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    return [into, *jars]


def run_client(cp: list[pathlib.Path], *args: str, timeout: float = 180, program: str = "KafkaJavaClient") -> list[str]:
    """Run the compiled ``program`` with ``args``; its stdout lines (a failure fails the test with stderr)."""
    java = shutil.which("java")
    assert java is not None, "no java: apt-get install openjdk-17-jdk-headless (scripts/test does)"
    done = subprocess.run(
        [java, "-cp", ":".join(map(str, cp)), program, *args],
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    assert done.returncode == 0, f"the Java client failed ({done.returncode}):\n{done.stdout}\n{done.stderr}"
    return done.stdout.splitlines()
