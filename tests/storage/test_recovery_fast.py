"""The clean-close fast path: a producer after a clean close skips re-checking the active segments."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap

import pytest
from support.paths import TESTS_DIR
from support.storage import append, expected_messages, fields, read_all, write_stream

import adiskq
from adiskq._storage import partition_writer as partition_module
from adiskq._storage.stream import StreamWriter, load_clean_close

PART = os.path.join("parts", "000000")


def _data(stream: str) -> str:
    return os.path.join(stream, PART, f"{0:020d}.data")


@pytest.fixture
def scans(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """The partitions whose active segment recovery checked record by record, in order."""
    calls: list[int] = []
    real = partition_module.recover_segment

    def spy(directory: str, partition: int, base_offset: int, **options: int) -> object:
        calls.append(partition)
        return real(directory, partition, base_offset, **options)

    monkeypatch.setattr(partition_module, "recover_segment", spy)
    return calls


def _open_and_close(stream: str, **options: object) -> adiskq.RecoveryReport:
    writer = StreamWriter.open(stream, **options)  # type: ignore[arg-type]
    writer.close()
    return writer.recovery


def _crash_after(stream: str, code: str) -> None:
    """Run ``code`` with ``writer`` open on the stream in a child that is then SIGKILLed."""
    script = (
        textwrap.dedent(
            f"""
        import os, signal, sys
        sys.path.insert(0, {TESTS_DIR!r})
        from support.storage import append, fields
        from adiskq._storage.stream import StreamWriter
        writer = StreamWriter.open({stream!r})
        """
        )
        + textwrap.dedent(code)
        + "\nos.kill(os.getpid(), signal.SIGKILL)\n"
    )
    result = subprocess.run([sys.executable, "-c", script], check=False, capture_output=True, timeout=60)
    assert result.returncode == -signal.SIGKILL, result.stderr.decode()


def test_clean_close_skips_the_check(stream_path: str, scans: list[int]) -> None:
    """After a clean close, the next producer trusts every partition's active segment as it is."""
    writer = StreamWriter.open(stream_path, partitions=3)
    for partition in writer.partitions:
        append(partition, fields(5))
    writer.close()
    scans.clear()
    report = _open_and_close(stream_path)
    assert scans == []
    assert report.clean_partitions == (0, 1, 2)
    assert adiskq.stats(stream_path).last_recovery == report


def test_fast_path_continues_at_the_right_offset(stream_path: str, scans: list[int]) -> None:
    """A trusted segment appends at the next offset and after its last byte, as a checked one would."""
    write_stream(stream_path, [fields(5)])
    writer = StreamWriter.open(stream_path)
    try:
        assert writer.recovery.clean_partitions == (0,)
        assert append(writer.partitions[0], fields(2, 5)) == 5
    finally:
        writer.close()
    assert read_all(os.path.join(stream_path, PART)) == expected_messages(fields(7))


def test_open_removes_the_clean_close_record(stream_path: str) -> None:
    """While a producer has the stream open, no clean-close record exists."""
    write_stream(stream_path, [fields(3)])
    assert load_clean_close(stream_path)
    writer = StreamWriter.open(stream_path)
    try:
        assert load_clean_close(stream_path) == {}
    finally:
        writer.close()
    assert load_clean_close(stream_path)


def test_crash_after_appending_gets_the_full_check(stream_path: str, scans: list[int]) -> None:
    """A producer killed after appending leaves no clean-close record: the next open checks everything."""
    write_stream(stream_path, [fields(3)])
    _crash_after(stream_path, "append(writer.partitions[0], fields(2, 3))")
    scans.clear()
    report = _open_and_close(stream_path)
    assert scans == [0]
    assert report.clean_partitions == ()
    assert read_all(os.path.join(stream_path, PART)) == expected_messages(fields(5))


def test_crash_without_writing_gets_the_full_check(stream_path: str, scans: list[int]) -> None:
    """Even a producer killed before writing anything costs the next open its full check."""
    write_stream(stream_path, [fields(3)])
    _crash_after(stream_path, "pass")
    scans.clear()
    report = _open_and_close(stream_path)
    assert scans == [0]
    assert report.clean_partitions == ()


def test_crash_with_a_torn_tail_is_repaired(stream_path: str) -> None:
    """A producer killed after a torn write is repaired on the next open, not trusted."""
    write_stream(stream_path, [fields(3)])
    _crash_after(
        stream_path,
        f"""
        import os
        fd = os.open({_data(stream_path)!r}, os.O_WRONLY | os.O_APPEND)
        os.write(fd, b"\\x40\\x00\\x00\\x00torn")
        """,
    )
    report = _open_and_close(stream_path)
    assert report.clean_partitions == ()
    assert [r.action.startswith("cut 8 bytes") for r in report.repairs] == [True]
    assert read_all(os.path.join(stream_path, PART)) == expected_messages(fields(3))


def test_close_without_sync_leaves_no_record(stream_path: str, scans: list[int]) -> None:
    """close(sync=False) does not vouch for the files, so the next open checks them."""
    writer = StreamWriter.open(stream_path)
    append(writer.partitions[0], fields(3))
    writer.close(sync=False)
    scans.clear()
    assert _open_and_close(stream_path).clean_partitions == ()
    assert scans == [0]


def test_changed_size_is_not_trusted(stream_path: str, scans: list[int]) -> None:
    """Bytes added to .data after a clean close are found and cut: the record no longer matches."""
    write_stream(stream_path, [fields(3)])
    size = os.path.getsize(_data(stream_path))
    with open(_data(stream_path), "ab") as file:
        file.write(b"\xff" * 10)
    scans.clear()
    report = _open_and_close(stream_path)
    assert scans == [0]
    assert report.repairs[0].position == size


def test_changed_bytes_of_the_same_size_are_not_trusted(stream_path: str, scans: list[int]) -> None:
    """A .data rewritten in place (same size, new modification time) gets the full check."""
    write_stream(stream_path, [fields(3)])
    with open(_data(stream_path), "r+b") as file:
        file.seek(-1, os.SEEK_END)
        file.write(b"!")
    stat = os.stat(_data(stream_path))
    recorded = load_clean_close(stream_path)[0].data_file
    if stat.st_mtime_ns == recorded[1]:  # a coarse clock: make the change visible the way a later write would
        os.utime(_data(stream_path), ns=(stat.st_atime_ns, stat.st_mtime_ns + 1))
    scans.clear()
    report = _open_and_close(stream_path)
    assert scans == [0]
    assert "CRC" in report.repairs[0].action


def test_record_for_another_segment_is_not_trusted(stream_path: str, scans: list[int]) -> None:
    """A clean-close record naming a different active segment is ignored."""
    write_stream(stream_path, [fields(3)])
    path = os.path.join(stream_path, "recovery.json")
    with open(path) as file:
        data = json.load(file)
    data["clean_close"]["0"]["base_offset"] = 1
    with open(path, "w") as file:
        json.dump(data, file)
    scans.clear()
    assert _open_and_close(stream_path).clean_partitions == ()
    assert scans == [0]


@pytest.mark.parametrize(
    "damage",
    [
        "{not json",
        '{"clean_close": 3}',
        '{"clean_close": {"0": {"base_offset": 0}}}',
        '{"clean_close": {"x": {}}}',
        "[]",
    ],
)
def test_damaged_record_is_ignored(stream_path: str, scans: list[int], damage: str) -> None:
    """A damaged recovery.json costs only the fast path: the open checks everything and succeeds."""
    write_stream(stream_path, [fields(3)])
    with open(os.path.join(stream_path, "recovery.json"), "w") as file:
        file.write(damage)
    scans.clear()
    assert _open_and_close(stream_path).clean_partitions == ()
    assert scans == [0]
    assert read_all(os.path.join(stream_path, PART)) == expected_messages(fields(3))


def test_new_partitions_open_without_a_record(stream_path: str, scans: list[int]) -> None:
    """Partitions added on reopen are created fresh; the old ones still use the fast path."""
    write_stream(stream_path, [fields(3)], partitions=1)
    report = _open_and_close(stream_path, partitions=2)
    assert report.clean_partitions == (0,)
    assert adiskq.stats(stream_path).partitions[1].next_offset == 0
