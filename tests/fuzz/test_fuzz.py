"""The fuzzers over the compiled core's parsers (``fuzz_codec.py``, ``fuzz_kafka.py``,
``fuzz_kafka_fetch.py``, ``fuzz_kafka_produce.py``), for a bounded time.

The normal run fuzzes for 20 seconds; ``-m slow`` for ten minutes. A crash or a disagreement with
the pure-Python reference fails the test with libFuzzer's report and the input that caused it.
"""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from adiskq._sansio import core

HERE = os.path.dirname(os.path.abspath(__file__))


def fuzz(seconds: int, tmp_path: str, script: str = "fuzz_codec.py") -> None:
    assert core.COMPILED, "the compiled core is not built: run the README's install command"
    result = subprocess.run(
        [sys.executable, os.path.join(HERE, script), f"-max_total_time={seconds}", "-print_final_stats=1"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=seconds + 120,
        check=False,
    )
    assert result.returncode == 0, result.stderr[-4000:]
    assert "Done" in result.stderr, result.stderr[-2000:]


def test_the_compiled_parsers_survive_fuzzing_and_agree_with_the_reference(tmp_path: str) -> None:
    # A sample: scripts/sanitize runs the same fuzzer longer on the sanitized build, and -m slow ten minutes.
    fuzz(5, tmp_path)


@pytest.mark.slow
@pytest.mark.timeout(900)  # the suite's 300 s limit is for tests that wait on something
def test_the_compiled_parsers_survive_ten_minutes_of_fuzzing(tmp_path: str) -> None:
    fuzz(600, tmp_path)


def test_the_compiled_kafka_decoder_survives_fuzzing_and_agrees_with_the_reference(tmp_path: str) -> None:
    """Hostile record batches: the compiled decoder never crashes and answers as the reference does."""
    fuzz(5, tmp_path, "fuzz_kafka.py")


@pytest.mark.slow
@pytest.mark.timeout(900)
def test_the_compiled_kafka_decoder_survives_ten_minutes_of_fuzzing(tmp_path: str) -> None:
    """The same for ten minutes."""
    fuzz(600, tmp_path, "fuzz_kafka.py")


def test_the_compiled_fetch_request_reader_survives_fuzzing_and_agrees_with_the_reference(tmp_path: str) -> None:
    """Hostile Fetch requests: the compiled reader never crashes and answers as the reference does."""
    fuzz(5, tmp_path, "fuzz_kafka_fetch.py")


@pytest.mark.slow
@pytest.mark.timeout(900)
def test_the_compiled_fetch_request_reader_survives_ten_minutes_of_fuzzing(tmp_path: str) -> None:
    """The same for ten minutes."""
    fuzz(600, tmp_path, "fuzz_kafka_fetch.py")


def test_the_compiled_produce_request_reader_survives_fuzzing_and_agrees_with_the_reference(tmp_path: str) -> None:
    """Hostile Produce requests: the compiled reader never crashes and answers as the reference does."""
    fuzz(5, tmp_path, "fuzz_kafka_produce.py")


@pytest.mark.slow
@pytest.mark.timeout(900)
def test_the_compiled_produce_request_reader_survives_ten_minutes_of_fuzzing(tmp_path: str) -> None:
    """The same for ten minutes."""
    fuzz(600, tmp_path, "fuzz_kafka_produce.py")
