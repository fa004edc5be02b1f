"""`adiskq check`: every record and index entry verified; `--repair` fixes what can be fixed."""

from __future__ import annotations

import os
import pathlib

import pytest
from support.cli import append, fill, flip_byte, invoke, producer_open, run_as_nobody, segment_files

import adiskq
from adiskq._storage.offsets import save_offsets

RECORD = 24 + 8 + 100  # a record of a 100-byte value under an 8-byte random key


@pytest.fixture
def stream(stream_path: str) -> str:
    """One partition of 40 records of 132 bytes, in 1 KiB segments (8 records each: 4 sealed, 1 active)."""
    fill(stream_path, [b"x" * 100] * 40, segment_size_bytes=1024, one_at_a_time=True)
    assert adiskq.stats(stream_path).partitions[0].segments == 5
    return stream_path


def problem_lines(output: str, path: str) -> list[str]:
    return [line for line in output.splitlines() if line.startswith(path)]


def test_a_sound_stream_checks_clean_with_status_0(stream: str) -> None:
    """Every record and entry verified, nothing wrong: status 0 and a summary."""
    result = invoke("check", stream)
    assert result.exit_code == 0
    assert result.stdout == "checked 1 partitions, 5 segments, 40 records (5.2 KiB): no problems\n"


def test_a_damaged_record_in_a_sealed_segment_is_reported_with_file_and_position(stream: str) -> None:
    """A CRC mismatch names the file, the byte, the offset, and where reading can go on."""
    data = segment_files(stream, 0, "data")[0]
    flip_byte(data, RECORD + 40)
    result = invoke("check", stream)
    assert result.exit_code == 1
    assert problem_lines(result.stdout, stream) == [
        f"{data}:{RECORD}: the record of offset 1 is damaged: CRC-32C mismatch "
        "(the messages after it can still be read, from offset 2)"
    ]
    assert "1 needs a person" in result.stdout
    assert "Restore the files named above from a backup" in result.stdout


def test_repair_cannot_fix_sealed_damage_and_changes_nothing(stream: str) -> None:
    """--repair says it can fix none of it, and leaves the files as they were."""
    data = segment_files(stream, 0, "data")[0]
    flip_byte(data, RECORD + 40)
    before = pathlib.Path(data).read_bytes()
    result = invoke("check", stream, "--repair")
    assert result.exit_code == 1
    assert "--repair can fix none of these; nothing was changed" in result.stdout
    assert pathlib.Path(data).read_bytes() == before


def test_a_torn_tail_is_reported_and_repair_cuts_it(stream: str) -> None:
    """Bytes after the last record of the active segment are a torn tail; --repair cuts them."""
    active = segment_files(stream, 0, "data")[-1]
    end = os.path.getsize(active)
    append(active, b"\x40\x00\x00\x00torn")
    result = invoke("check", stream)
    assert result.exit_code == 1
    assert problem_lines(result.stdout, stream) == [
        f"{active}:{end}: torn tail of 8 bytes: the data ends inside a record (a write cut short)"
    ]
    assert f"1 can be repaired: run `adiskq check --repair {stream}`" in result.stdout
    repaired = invoke("check", stream, "--repair")
    assert repaired.exit_code == 0, repaired.output
    assert f"cut 8 bytes of torn tail (the last record is incomplete (torn write)) at byte {end}" in repaired.stdout
    assert repaired.stdout.endswith(
        "checking again:\nchecked 1 partitions, 5 segments, 40 records (5.2 KiB): no problems\n"
    )
    assert os.path.getsize(active) == end


def test_a_wrong_index_entry_of_a_sealed_segment_is_rebuilt_from_sound_data(stream: str) -> None:
    """An index entry that disagrees with sound data is reported; --repair rebuilds the index."""
    index = segment_files(stream, 0, "index")[1]
    flip_byte(index, 24 + 8)  # entry 1's position
    result = invoke("check", stream)
    assert result.exit_code == 1
    (line,) = problem_lines(result.stdout, stream)
    assert line.startswith(f"{index}:24: the entry of offset 9 says byte ")
    assert line.endswith(f"the record is at byte {RECORD}, {RECORD} bytes")
    repaired = invoke("check", stream, "--repair")
    assert repaired.exit_code == 0, repaired.output
    assert "(sealed segment, rebuilt from its sound data)" in repaired.stdout
    assert adiskq.read(stream, 0, 9).value == b"x" * 100


def test_a_missing_time_index_is_reported_and_recreated(stream: str) -> None:
    """A sealed segment without .timeindex is reported; the producer open of --repair rebuilds it."""
    timeindex = segment_files(stream, 0, "timeindex")[2]
    os.unlink(timeindex)
    result = invoke("check", stream)
    assert problem_lines(result.stdout, stream) == [f"{timeindex}: missing: it can be rebuilt from .data"]
    assert invoke("check", stream, "--repair").exit_code == 0
    assert os.path.getsize(timeindex) == 8 * 16


def test_a_damaged_active_key_index_is_reported_and_rewritten_by_repair(stream: str) -> None:
    """The active segment's hash column is checked entry by entry against the records' keys, like
    its time and tag columns (lookups trust an active column: a wrong entry hides its record from
    find); --repair (recovery) rewrites it."""
    key = adiskq.read(stream, 0, 34).key
    keyindex = segment_files(stream, 0, "keyindex")[-1]  # offsets 32..39: the active segment's
    assert os.path.getsize(keyindex) == 8 * 4  # a bare hash column, not sealed
    flip_byte(keyindex, 2 * 4 + 1)  # the entry of offset 34
    result = invoke("check", stream)
    assert result.exit_code == 1
    assert problem_lines(result.stdout, stream) == [
        f"{keyindex}:8: the entry of offset 34 does not hold its record's key hash"
    ]
    os.truncate(keyindex, 3 * 4 + 2)  # and a torn entry, as a crash leaves one
    result = invoke("check", stream)
    assert problem_lines(result.stdout, stream) == [
        f"{keyindex}:12: ends with a partial entry of 2 bytes",
        f"{keyindex}:8: the entry of offset 34 does not hold its record's key hash",
    ]
    repaired = invoke("check", stream, "--repair")
    assert repaired.exit_code == 0, repaired.output
    assert invoke("check", stream).exit_code == 0
    assert [m.offset for m in adiskq.find(stream, key)] == [34]


def test_records_missing_from_the_active_index_are_reported_and_indexed(stream: str) -> None:
    """Whole records after the last index entry (a crash between the writes) are indexed by --repair."""
    index = segment_files(stream, 0, "index")[-1]
    os.truncate(index, os.path.getsize(index) - 24)
    result = invoke("check", stream)
    lines = problem_lines(result.stdout, stream)
    assert any("1 whole records after the last index entry are not in the index" in line for line in lines)
    assert invoke("check", stream, "--repair").exit_code == 0
    assert adiskq.stats(stream).partitions[0].next_offset == 40


def test_damage_inside_the_active_segment_says_repair_keeps_what_follows(stream: str) -> None:
    """Rot inside the active segment's committed data: check says nothing is cut and which offsets stay."""
    active = segment_files(stream, 0, "data")[-1]
    flip_byte(active, 40)  # the first record of the active segment (offsets 32..39)
    result = invoke("check", stream)
    assert f"{active}:0: the record of offset 32 is damaged: CRC-32C mismatch" in result.stdout
    assert "repairing cuts nothing here, 1 damaged record(s) keep their offsets (32;" in result.stdout


def test_a_damaged_last_record_of_the_active_segment_says_repair_keeps_its_offset(stream: str) -> None:
    """A bad newest record that its index entry committed is damage: check says repair keeps its offset."""
    active = segment_files(stream, 0, "data")[-1]
    flip_byte(active, os.path.getsize(active) - 1)  # the last record (offset 39)
    result = invoke("check", stream)
    assert "repairing cuts nothing here, 1 damaged record(s) keep their offsets (39;" in result.stdout
    assert "repairing cuts the data" not in result.stdout


def test_a_producer_writing_is_not_mistaken_for_damage(stream: str) -> None:
    """While a producer holds the stream, an unindexed tail is in flight and not reported."""
    with producer_open(stream):
        append(segment_files(stream, 0, "data")[-1], b"\x40\x00\x00\x00half")
        result = invoke("check", stream)
    assert result.exit_code == 0, result.output
    assert "a producer is writing (pid " in result.stdout
    assert result.stdout.rstrip().endswith("no problems")


def test_repair_refuses_while_a_producer_has_the_stream(stream: str) -> None:
    """--repair needs the stream to itself: it says who has it, and changes nothing."""
    active = segment_files(stream, 0, "data")[-1]
    index = segment_files(stream, 0, "index")[0]
    flip_byte(index, 8)
    with producer_open(stream):
        append(active, b"junk")
        size = os.path.getsize(active)
        result = invoke("check", stream, "--repair")
    assert result.exit_code == 1
    assert result.stderr.startswith(f"Error: stream {stream!r} is open in a producer (pid {os.getpid()} on host")
    assert "--repair needs the stream to itself" in result.stderr
    assert os.path.getsize(active) == size


def test_a_missing_index_on_the_oldest_segment_is_explained(stream: str) -> None:
    """The oldest segment without .index looks like an interrupted vacuum, and check says so."""
    index = segment_files(stream, 0, "index")[0]
    os.unlink(index)
    result = invoke("check", stream)
    assert f"{index}: missing: this looks like a vacuum that was interrupted" in result.stdout


def test_a_missing_segment_leaves_a_gap_that_is_reported(stream: str) -> None:
    """Offsets missing between two segments are reported as such."""
    for extension in ("data", "index", "timeindex"):
        os.unlink(segment_files(stream, 0, extension)[2])
    result = invoke("check", stream)
    assert result.exit_code == 1
    assert "offsets 16..23 are missing: the previous segment ends before this one starts" in result.stdout


def test_a_badly_damaged_file_lists_twenty_problems_then_counts_the_rest(stream_path: str) -> None:
    """One line per problem up to twenty per file, then one line for the rest."""
    fill(stream_path, [b"x"] * 30)
    timeindex = segment_files(stream_path, 0, "timeindex")[0]
    with open(timeindex, "r+b") as file:
        file.write(b"\x00" * os.path.getsize(timeindex))
    result = invoke("check", stream_path)
    lines = problem_lines(result.stdout, stream_path)
    assert len(lines) == 21
    assert lines[-1] == f"{timeindex}: ... and 10 more problems in this file"


def test_a_corrupt_group_offsets_file_is_reported(stream: str) -> None:
    """Committed offsets that are not JSON are a problem, with what to do."""
    save_offsets(stream, "billing", {0: 1})
    offsets = os.path.join(stream, "groups", "billing", "offsets.json")
    with open(offsets, "w") as file:
        file.write("{not json")
    result = invoke("check", stream)
    assert result.exit_code == 1
    assert f"{offsets}: {offsets} is not valid JSON" in result.stdout


def test_a_group_offset_past_the_end_is_a_note_not_damage(stream: str) -> None:
    """A committed offset beyond the partition's end (legal in Kafka) is a note with the command that
    moves it, not damage to restore from a backup: the stream is sound, exit status 0."""
    save_offsets(stream, "billing", {0: 99})
    result = invoke("check", stream)
    assert result.exit_code == 0, result.stdout
    assert "note: " in result.stdout
    assert "group 'billing' committed offset 99 of partition 0, past its end (next offset 40)" in result.stdout
    assert "Not damage: Kafka lets a group commit any offset" in result.stdout
    assert "adiskq offsets --group billing --reset-to newest" in result.stdout
    assert "no problems" in result.stdout
    assert "backup" not in result.stdout


def test_repair_of_a_sound_stream_changes_nothing(stream: str) -> None:
    """--repair on a sound stream checks, finds nothing, and exits 0 without opening it."""
    result = invoke("check", stream, "--repair")
    assert result.exit_code == 0
    assert "repaired" not in result.stdout


def test_files_that_cannot_be_read_are_listed_and_fail_the_check(shared_dir: str) -> None:
    """Run as an unprivileged user, a file it may not read is named, and the check exits 1."""
    path = os.path.join(shared_dir, "stream")
    fill(path, [b"x" * 100] * 20, segment_size_bytes=1024, one_at_a_time=True)
    hidden = segment_files(path, 0, "data")[1]
    os.chmod(hidden, 0o600)
    done = run_as_nobody("check", path)
    assert done.returncode == 1, done.stderr
    assert f"{hidden}: cannot be read (Permission denied)" in done.stdout
    assert "1 files could not be read, so they were not checked" in done.stdout


def test_a_segment_vacuumed_during_the_check_is_not_reported(stream: str) -> None:
    """A segment listed, then deleted by a vacuum before it was read, is skipped, not called missing."""
    from adiskq._storage.stream import StreamReader
    from adiskq._storage.verify import check_segment, list_segments

    segments, _ = list_segments(StreamReader.open(stream))
    oldest = segments[0]
    for extension in ("index", "timeindex", "data"):
        os.unlink(oldest.path(extension))
    result = check_segment(oldest, expected_base=None, next_base=segments[1].base, live=True)
    assert result.vanished
    assert result.problems == ()


def test_repair_finds_damage_a_clean_close_record_would_hide_and_keeps_the_records_after_it(stream: str) -> None:
    """Bit rot that keeps size and time stamp is found (--repair does not trust the clean-close record);
    valid records follow it, so it is rot inside committed data: nothing is cut and check still lists it."""
    active = segment_files(stream, 0, "data")[-1]
    times = os.stat(active)
    flip_byte(active, RECORD + 40)  # the second record of the active segment (offset 33)
    os.utime(active, ns=(times.st_atime_ns, times.st_mtime_ns))
    result = invoke("check", stream, "--repair")
    assert "kept every committed record" in result.stdout
    assert "keep their offsets (33;" in result.stdout
    assert "torn tail" not in result.stdout.split("kept every committed record")[0]
    assert adiskq.stats(stream).partitions[0].next_offset == 40
    again = invoke("check", stream)
    assert again.exit_code == 1  # the damaged record is still there to see
    assert "the record of offset 33 is damaged" in again.stdout
    assert "repairing cuts nothing here" in again.stdout
    assert adiskq.read(stream, 0, 34).offset == 34


def test_a_damaged_sealed_key_index_is_reported_and_rebuilt_by_repair(stream: str) -> None:
    """A key index that fails its CRC is a problem --repair fixes; find answers right before and after."""
    key = adiskq.read(stream, 0, 3).key
    keyindex = segment_files(stream, 0, "keyindex")[0]
    flip_byte(keyindex, 2)
    result = invoke("check", stream)
    assert result.exit_code == 1
    assert problem_lines(result.stdout, stream) == [
        f"{keyindex}: damaged (its CRC-32C does not match): lookups search the data instead; it can be rebuilt"
    ]
    assert [m.offset for m in adiskq.find(stream, key)] == [3]
    repaired = invoke("check", stream, "--repair")
    assert repaired.exit_code == 0, repaired.output
    assert "removed the damaged key index" in repaired.stdout
    assert invoke("check", stream).exit_code == 0
    assert [m.offset for m in adiskq.find(stream, key)] == [3]
