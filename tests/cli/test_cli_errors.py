"""What the command line says when the path is wrong, the stream is locked, damaged or unreadable.

Each failure is one line on stderr saying what is wrong and what to do, with exit status 1, and
nothing that was stored is changed.
"""

from __future__ import annotations

import json
import os
import pathlib

import pytest
from support.cli import fill, flip_byte, invoke, producer_open, run_as_nobody, segment_files

import adiskq

READING = [
    ("read",),
    ("stats",),
    ("check",),
    ("vacuum", "--max-age", "1d"),
    ("groups",),
    ("offsets", "-g", "billing", "--reset-to", "oldest"),
]


def one_line_error(stderr: str) -> str:
    lines = stderr.splitlines()
    assert len(lines) == 1, stderr
    assert lines[0].startswith("Error: ")
    return lines[0]


def snapshot(folder: pathlib.Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() for p in folder.rglob("*") if p.is_file()}


@pytest.mark.parametrize("command", READING, ids=lambda c: c[0])
def test_a_folder_that_is_not_a_stream_is_refused_and_left_alone(tmp_path: pathlib.Path, command: tuple[str]) -> None:
    """A folder of other files: 'no adiskq stream' and why, and the folder is untouched."""
    (tmp_path / "notes.txt").write_text("mine")
    before = snapshot(tmp_path)
    result = invoke(command[0], str(tmp_path), *command[1:])
    assert result.exit_code == 1
    message = one_line_error(result.stderr)
    assert f"no adiskq stream at {str(tmp_path)!r} (the folder has no settings.json)" in message
    assert snapshot(tmp_path) == before


@pytest.mark.parametrize("command", READING, ids=lambda c: c[0])
def test_a_missing_path_is_refused_and_not_created(tmp_path: pathlib.Path, command: tuple[str]) -> None:
    """Nothing at the path: an error, and no stream is created by a command that only reads or cleans."""
    path = tmp_path / "missing"
    result = invoke(command[0], str(path), *command[1:])
    assert result.exit_code == 1
    assert "(nothing is there): check the path" in one_line_error(result.stderr)
    assert not path.exists()


def test_a_file_is_not_a_stream(tmp_path: pathlib.Path) -> None:
    """A regular file is not a stream folder."""
    path = tmp_path / "file"
    path.write_text("hello")
    result = invoke("stats", str(path))
    assert "it is a file, not a stream folder" in one_line_error(result.stderr)


def test_write_refuses_a_folder_that_is_not_a_stream(tmp_path: pathlib.Path) -> None:
    """Writing never turns someone's folder into a stream: it is refused and left untouched."""
    (tmp_path / "notes.txt").write_text("mine")
    before = snapshot(tmp_path)
    result = invoke("write", str(tmp_path), input=b"x\n")
    assert result.exit_code == 1
    message = one_line_error(result.stderr)
    assert "is not an adiskq stream (the folder holds notes.txt but no settings.json); nothing was changed" in message
    assert snapshot(tmp_path) == before


def test_a_go_diskq_stream_is_named_as_another_format(stream_path: str) -> None:
    """A settings.json of another format is not taken for ours."""
    os.makedirs(stream_path)
    with open(os.path.join(stream_path, "settings.json"), "w") as file:
        json.dump({"partition_count": 3}, file)
    message = one_line_error(invoke("read", stream_path).stderr)
    assert "it may be a go-diskq stream or a newer adiskq format" in message


def test_writing_to_a_locked_stream_names_the_holder(stream_path: str) -> None:
    """While another producer has the stream, write says who and what to do, and writes nothing."""
    fill(stream_path, [b"x"])
    with producer_open(stream_path):
        result = invoke("write", stream_path, input=b"y\n")
    assert result.exit_code == 1
    message = one_line_error(result.stderr)
    assert message.startswith(f"Error: stream {stream_path!r} is locked by a producer (pid {os.getpid()} on host ")
    assert message.endswith("Stop that producer, or run this again once it has closed")
    assert adiskq.stats(stream_path).message_count == 1


def test_write_can_wait_for_a_locked_stream(stream_path: str) -> None:
    """`--lock-timeout` waits that long before giving up."""
    fill(stream_path, [b"x"])
    with producer_open(stream_path):
        result = invoke("write", stream_path, "--lock-timeout", "0.2", input=b"y\n")
    assert result.exit_code == 1
    assert "is locked by a producer" in result.stderr


def test_a_locked_stream_can_still_be_read(stream_path: str) -> None:
    """Readers need no lock: read, stats and check work while a producer writes."""
    fill(stream_path, [b"x"])
    with producer_open(stream_path):
        assert invoke("read", stream_path, "--format", "value").stdout == "x\n"
        assert invoke("stats", stream_path).exit_code == 0
        assert invoke("check", stream_path).exit_code == 0


def test_damaged_settings_are_one_line_with_what_to_do(stream_path: str) -> None:
    """A settings.json that is not JSON is named, with the advice to restore it."""
    fill(stream_path, [b"x"])
    with open(os.path.join(stream_path, "settings.json"), "w") as file:
        file.write("{broken")
    for command in ("read", "stats", "check"):
        result = invoke(command, stream_path)
        assert result.exit_code == 1
        message = one_line_error(result.stderr)
        assert "settings.json is not valid JSON" in message
        assert "restore it from a backup" in message


def test_reading_a_damaged_record_names_the_file_byte_and_offset(stream_path: str) -> None:
    """A bad record stops the read with its file, position and offset, and says how to read past it."""
    fill(stream_path, [b"first", b"second"])
    data = segment_files(stream_path, 0, "data")[0]
    first_size = 24 + 8 + len(b"first")
    flip_byte(data, first_size + 30)
    result = invoke("read", stream_path, "--format", "value")
    assert result.exit_code == 1
    assert result.stdout == "first\n"  # what came before the damage was printed
    message = one_line_error(result.stderr)
    assert message == (
        f"Error: corrupt record in {data} at byte {first_size} (offset 1; read on from offset 2 to pass it): "
        "CRC-32C mismatch. "
        "Run `adiskq check` on the stream to list the damage"
    )


def test_an_unreadable_data_file_is_a_permission_error(shared_dir: str) -> None:
    """Run as an unprivileged user, reading a file it may not read says so, naming the file and owner."""
    path = os.path.join(shared_dir, "stream")
    fill(path, [b"x"])
    data = segment_files(path, 0, "data")[0]
    os.chmod(data, 0o600)
    done = run_as_nobody("read", path)
    assert done.returncode == 1
    assert done.stdout == ""
    assert one_line_error(done.stderr) == (
        f"Error: permission denied ({data}): run adiskq as a user who may read (and, to write, change) the "
        "stream's files (they belong to root), or change their permissions"
    )


def test_unreadable_settings_are_a_permission_error(shared_dir: str) -> None:
    """Even stats, which reads least, says permission denied on settings.json."""
    path = os.path.join(shared_dir, "stream")
    fill(path, [b"x"])
    os.chmod(os.path.join(path, "settings.json"), 0o600)
    done = run_as_nobody("stats", path)
    assert done.returncode == 1
    assert "permission denied (" in one_line_error(done.stderr)
    assert "settings.json)" in done.stderr


def test_writing_without_write_permission_is_a_permission_error(shared_dir: str) -> None:
    """A user who may read but not write the stream gets a permission error from write, and no change."""
    path = os.path.join(shared_dir, "stream")
    fill(path, [b"x"])
    done = run_as_nobody("write", path)
    count = adiskq.stats(path).message_count
    assert done.returncode == 1
    assert "Error: permission denied (" in one_line_error(done.stderr)
    assert count == 1


def test_an_unprivileged_user_can_read_a_readable_stream(shared_dir: str) -> None:
    """Reading needs only read permission: the same user reads a stream it may read."""
    path = os.path.join(shared_dir, "stream")
    fill(path, [b"hello"])
    done = run_as_nobody("read", path, "--format", "value")
    assert (done.returncode, done.stdout, done.stderr) == (0, "hello\n", "")


def test_a_symlink_loop_or_a_dangling_symlink_is_named_as_such(tmp_path: pathlib.Path) -> None:
    """A stream path that is a symbolic link looping back on itself, or pointing nowhere, is called
    that (not "a file") by readers and by write."""
    os.symlink(tmp_path / "loop2", tmp_path / "loop1")
    os.symlink(tmp_path / "loop1", tmp_path / "loop2")
    os.symlink(tmp_path / "nowhere", tmp_path / "dangling")
    for name, says in (
        ("loop1", "it is a symbolic link that loops back on itself"),
        ("dangling", f"it is a symbolic link to {str(tmp_path / 'nowhere')!r}, which does not exist"),
    ):
        read = one_line_error(invoke("stats", str(tmp_path / name)).stderr)
        assert f"({says}, not a stream folder)" in read
        written = one_line_error(invoke("write", str(tmp_path / name), input=b"x\n").stderr)
        assert f"({says}, not a folder); nothing was changed" in written
