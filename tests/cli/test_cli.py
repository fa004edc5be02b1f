"""The command line as a whole: how it starts, its help, exit statuses and its error boundary."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
from support.cli import fill, invoke, run

import adiskq
import adiskq._storage.api

COMMANDS = ["write", "read", "stats", "vacuum", "check", "groups", "offsets"]


@pytest.mark.parametrize("command", COMMANDS)
def test_every_command_help_shows_an_example(command: str) -> None:
    """`adiskq COMMAND --help` has an Examples section that runs that very command."""
    result = invoke(command, "--help")
    assert result.exit_code == 0
    examples = result.output.split("Examples:", 1)[1]
    assert f"adiskq {command} " in examples


def test_top_level_help_lists_every_command_and_an_example() -> None:
    """`adiskq --help` names each command and shows examples."""
    result = invoke("--help")
    assert result.exit_code == 0
    for command in COMMANDS:
        assert f"\n  {command} " in result.output
    assert "Examples:" in result.output


def test_version_prints_the_package_version() -> None:
    """`adiskq --version` prints the installed version."""
    result = invoke("--version")
    assert result.exit_code == 0
    assert adiskq.__version__ in result.output


def test_python_dash_m_runs_the_command_line(stream_path: str) -> None:
    """`python -m adiskq` is the same command line as the console script."""
    fill(stream_path, [b"one"])
    done = run("stats", stream_path)
    assert done.returncode == 0, done.stderr
    assert "1 messages in 1 partitions" in done.stdout


def test_console_script_is_installed(stream_path: str) -> None:
    """The `adiskq` console script sits beside the interpreter and runs."""
    fill(stream_path, [b"one"])
    script = os.path.join(os.path.dirname(sys.executable), "adiskq")
    done = subprocess.run(
        [script, "read", stream_path, "--format", "value"], capture_output=True, text=True, check=False
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout == "one\n"


def test_an_unknown_option_is_misuse_with_status_2(stream_path: str) -> None:
    """Misuse exits with status 2 and says what was wrong."""
    result = invoke("read", stream_path, "--no-such-option")
    assert result.exit_code == 2
    assert "No such option" in result.stderr


def test_an_unknown_command_is_misuse_with_status_2() -> None:
    """A command that does not exist is misuse."""
    result = invoke("frobnicate")
    assert result.exit_code == 2


def test_a_missing_argument_is_misuse_with_status_2() -> None:
    """A command without its PATH is misuse."""
    result = invoke("stats")
    assert result.exit_code == 2
    assert "Missing argument 'PATH'" in result.stderr


def test_an_error_is_one_line_with_status_1_and_no_traceback(tmp_path: object) -> None:
    """A failing command prints one line saying what is wrong and what to do, and exits 1."""
    done = run("stats", os.path.join(str(tmp_path), "missing"))
    assert done.returncode == 1
    assert done.stdout == ""
    lines = done.stderr.splitlines()
    assert len(lines) == 1
    assert lines[0].startswith("Error: no adiskq stream at")
    assert "`adiskq write PATH` creates a stream" in lines[0]


def test_debug_shows_the_traceback(tmp_path: object) -> None:
    """`adiskq --debug` lets the traceback through, for bug reports."""
    done = run("--debug", "stats", os.path.join(str(tmp_path), "missing"))
    assert done.returncode == 1
    assert "Traceback (most recent call last)" in done.stderr
    assert "StreamNotFoundError" in done.stderr


def test_an_unexpected_exception_is_reported_as_a_bug(stream_path: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """An exception adiskq did not expect is still one line, naming it and asking for --debug."""
    fill(stream_path, [b"one"])

    def broken(path: str, **options: object) -> None:
        raise RuntimeError("boom")

    monkeypatch.setattr(adiskq._storage.api, "stream_stats", broken)
    result = invoke("stats", stream_path)
    assert result.exit_code == 1
    assert result.stderr.strip() == (
        "Error: unexpected RuntimeError: boom. This is a bug in adiskq: run the command again with "
        "`adiskq --debug ...` to see the traceback, and report it"
    )


def test_ctrl_c_ends_with_status_130_quietly(stream_path: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """An interrupt ends the command with the shell's status for SIGINT and no traceback."""
    fill(stream_path, [b"one"])

    def interrupted(path: str, **options: object) -> None:
        raise KeyboardInterrupt

    monkeypatch.setattr(adiskq._storage.api, "stream_stats", interrupted)
    result = invoke("stats", stream_path)
    assert result.exit_code == 130
    assert result.stderr == ""


def test_the_demo_ends_by_showing_stats(tmp_path: object) -> None:
    """The demo's last output is `adiskq stats` on its stream."""
    path = os.path.join(str(tmp_path), "demo")
    done = subprocess.run(
        [sys.executable, "-m", "adiskq.demo", path], capture_output=True, text=True, timeout=60, check=False
    )
    assert done.returncode == 0, done.stderr
    tail = done.stdout.split("$ adiskq stats", 1)[1]
    assert f"stream {os.path.abspath(path)}" in tail
    assert "12 messages in 3 partitions" in tail
    assert "owner: none" in tail
