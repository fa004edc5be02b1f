"""settings.json and bad input: streams keep their settings; anything that is not a stream is left alone."""

from __future__ import annotations

import datetime as dt
import json
import os
import pathlib
import shutil

import pytest
from support.storage import append, expected_messages, fields, read_all, snapshot, write_stream

import adiskq
from adiskq._storage.stream import StreamWriter


def _settings(stream: str) -> dict[str, object]:
    with open(os.path.join(stream, "settings.json")) as file:
        data = json.load(file)
    assert isinstance(data, dict)
    return data


def test_new_stream_records_its_settings(stream_path: str) -> None:
    """A new stream writes settings.json with the format, partition count and the other settings."""
    StreamWriter.open(
        stream_path,
        partitions=3,
        segment_size_bytes=4096,
        retention=adiskq.Retention(max_bytes=10**6, max_age=dt.timedelta(hours=1)),
    ).close()
    assert _settings(stream_path) == {
        "format": "adiskq/5",
        "partition_count": 3,
        "segment_size_bytes": 4096,
        "retention_max_bytes": 10**6,
        "retention_max_age": 3600 * 10**9,
        "retention_max_disk_usage": None,
        "max_message_bytes": 8 * 2**20,
        "key_index": True,
    }
    assert sorted(os.listdir(os.path.join(stream_path, "parts"))) == ["000000", "000001", "000002"]


def test_settings_persist_across_opens(stream_path: str) -> None:
    """A reopen without arguments keeps every stored setting."""
    retention = adiskq.Retention(max_age=dt.timedelta(minutes=5), max_disk_usage=0.9)
    StreamWriter.open(stream_path, partitions=2, segment_size_bytes=2048, retention=retention).close()
    writer = StreamWriter.open(stream_path)
    writer.close()
    assert (writer.settings.partition_count, writer.settings.segment_size_bytes) == (2, 2048)
    assert writer.settings.retention == retention


def test_default_stream_has_one_partition(stream_path: str) -> None:
    """A stream created without a partition count has one partition."""
    StreamWriter.open(stream_path).close()
    assert _settings(stream_path)["partition_count"] == 1


def test_path_may_be_a_pathlike(tmp_path: pathlib.Path) -> None:
    """Writers and readers take os.PathLike paths as well as str."""
    path = tmp_path / "stream"
    writer = StreamWriter.open(path)
    append(writer.partitions[0], fields(1))
    writer.close()
    assert adiskq.read(path, 0, 0).value == fields(1)[0][0]


def test_empty_folder_becomes_a_stream(tmp_path: pathlib.Path) -> None:
    """A producer creates a stream in an existing, empty folder."""
    StreamWriter.open(tmp_path).close()
    assert _settings(os.fspath(tmp_path))["format"] == "adiskq/5"


def test_a_format_1_stream_is_read_and_written_as_it_is(stream_path: str) -> None:
    """A stream written before tags (format adiskq/1) reads unchanged, and a producer that opens it,
    writes to it and grows it leaves it in format adiskq/1 (only `adiskq upgrade` moves it): a
    reader that knows only format 1 and has it open is never surprised by a newer format."""
    write_stream(stream_path, [fields(3)])
    path = os.path.join(stream_path, "settings.json")
    old = _settings(stream_path) | {"format": "adiskq/1"}
    with open(path, "w") as file:
        json.dump(old, file)
    assert adiskq.read(stream_path, 0, 2).value == fields(3)[2][0]
    assert adiskq.read(stream_path, 0, 2).tag is None
    StreamWriter.open(stream_path).close()
    write_stream(stream_path, [fields(2, start=3)])
    assert _settings(stream_path) == old
    StreamWriter.open(stream_path, partitions=2).close()
    assert _settings(stream_path)["format"] == "adiskq/1"
    assert _settings(stream_path)["partition_count"] == 2


def test_more_partitions_are_added(stream_path: str) -> None:
    """Reopening with more partitions adds them, keeps the old data, and records the new count."""
    write_stream(stream_path, [fields(3)], partitions=2)
    writer = StreamWriter.open(stream_path, partitions=4)
    try:
        assert [p.partition for p in writer.partitions] == [0, 1, 2, 3]
        append(writer.partitions[3], fields(1))
    finally:
        writer.close()
    assert _settings(stream_path)["partition_count"] == 4
    assert [p.next_offset for p in adiskq.stats(stream_path).partitions] == [3, 0, 0, 1]
    assert read_all(os.path.join(stream_path, "parts", "000000")) == expected_messages(fields(3))


def test_fewer_partitions_are_refused_and_nothing_changes(stream_path: str) -> None:
    """Reopening with fewer partitions raises SettingsMismatchError and leaves every file as it was."""
    write_stream(stream_path, [fields(3)], partitions=3)
    before = snapshot(stream_path)
    with pytest.raises(adiskq.SettingsMismatchError, match="partitions=3 or more"):
        StreamWriter.open(stream_path, partitions=2)
    assert snapshot(stream_path) == before


@pytest.mark.parametrize(
    ("content", "match"),
    [
        (b"{not json", "not valid JSON"),
        (b"\xff\xfe", "not valid JSON"),
        (b"[1, 2]", "does not hold a JSON object"),
        (b'{"format": "adiskq/1"}', "damaged"),
        (b'{"format": "adiskq/1", "partition_count": "three"}', "damaged"),
        (b'{"format": "adiskq/1", "partition_count": 0}', "damaged"),
        (b'{"format": "adiskq/1", "partition_count": 1, "retention_max_bytes": -5}', "damaged"),
    ],
    ids=["syntax", "not-utf8", "array", "no-count", "text-count", "zero-count", "bad-retention"],
)
def test_corrupt_settings_are_refused_and_nothing_changes(stream_path: str, content: bytes, match: str) -> None:
    """A damaged settings.json gets a clear CorruptStreamError; no file is created, changed or deleted."""
    write_stream(stream_path, [fields(2)])
    with open(os.path.join(stream_path, "settings.json"), "wb") as file:
        file.write(content)
    before = snapshot(stream_path)
    with pytest.raises(adiskq.CorruptStreamError, match=match) as caught:
        StreamWriter.open(stream_path)
    assert "settings.json" in str(caught.value)
    assert "backup" in str(caught.value)
    assert snapshot(stream_path) == before
    with pytest.raises(adiskq.CorruptStreamError, match=match):
        adiskq.stats(stream_path)


def test_regular_file_is_refused_and_untouched(tmp_path: pathlib.Path) -> None:
    """A path that is a regular file is not a stream: NotAStreamError, and the file keeps its bytes."""
    path = tmp_path / "file"
    path.write_bytes(b"precious")
    with pytest.raises(adiskq.NotAStreamError, match="it is a file") as caught:
        StreamWriter.open(path)
    assert "nothing was changed" in str(caught.value)
    assert isinstance(caught.value, adiskq.Error)
    assert snapshot(os.fspath(tmp_path)) == {"file": b"precious"}


@pytest.mark.parametrize(
    "tree",
    [
        {"notes.txt": b"mine"},
        {"data": None},
        {"parts": None, "parts/000000": None, "parts/000000/00000000000000000000.data": b"x"},
        {"parts": None, "parts/other.txt": b"mine"},
        {"parts": b"a file called parts"},
        {"owner": b"", "photo.jpg": b"\xff\xd8"},
    ],
    ids=["file", "folder", "data-without-settings", "stray-in-parts", "parts-file", "owner-and-photo"],
)
def test_foreign_folder_is_refused_and_untouched(tmp_path: pathlib.Path, tree: dict[str, bytes | None]) -> None:
    """A non-empty folder without settings.json is refused with NotAStreamError; nothing is created or changed."""
    for name, content in tree.items():
        if content is None:
            (tmp_path / name).mkdir()
        else:
            (tmp_path / name).write_bytes(content)
    before = snapshot(os.fspath(tmp_path))
    with pytest.raises(adiskq.NotAStreamError, match=r"no settings\.json"):
        StreamWriter.open(tmp_path, partitions=2)
    assert snapshot(os.fspath(tmp_path)) == before


def test_go_diskq_stream_is_refused_and_untouched(tmp_path: pathlib.Path) -> None:
    """A go-diskq settings.json (no "format" key) is named as such and left alone."""
    (tmp_path / "settings.json").write_text('{"PartitionCount": 3, "SegmentSizeBytes": 33554432}')
    (tmp_path / "parts").mkdir()
    before = snapshot(os.fspath(tmp_path))
    with pytest.raises(adiskq.NotAStreamError, match="go-diskq"):
        StreamWriter.open(tmp_path)
    assert snapshot(os.fspath(tmp_path)) == before
    with pytest.raises(adiskq.StreamNotFoundError, match="go-diskq"):
        adiskq.stats(tmp_path)


def test_newer_format_is_refused(tmp_path: pathlib.Path) -> None:
    """A settings.json of another adiskq format version is refused, naming the format found."""
    (tmp_path / "settings.json").write_text('{"format": "adiskq/6", "partition_count": 1}')
    with pytest.raises(adiskq.NotAStreamError, match="adiskq/6"):
        StreamWriter.open(tmp_path)


def test_crashed_creation_is_finished(stream_path: str) -> None:
    """A folder left by a creation that crashed before settings.json (empty partitions) becomes the stream."""
    write_stream(stream_path, [], partitions=2)
    os.unlink(os.path.join(stream_path, "settings.json"))
    os.unlink(os.path.join(stream_path, "recovery.json"))
    writer = StreamWriter.open(stream_path, partitions=2)
    try:
        append(writer.partitions[1], fields(1))
    finally:
        writer.close()
    assert adiskq.read(stream_path, 1, 0).value == fields(1)[0][0]


@pytest.mark.parametrize(
    "arguments",
    [
        {"partitions": 0},
        {"partitions": -1},
        {"partitions": 10**6 + 1},
        {"partitions": 1.5},
        {"partitions": True},
        {"segment_size_bytes": 100},
        {"max_message_bytes": 10},
        {"max_message_bytes": 2**30 + 1},
    ],
)
def test_bad_arguments_are_refused_before_touching_disk(stream_path: str, arguments: dict[str, object]) -> None:
    """Out-of-range settings raise InvalidArgumentError (a ValueError) and create nothing."""
    with pytest.raises(adiskq.InvalidArgumentError, match="give"):
        StreamWriter.open(stream_path, **arguments)  # type: ignore[arg-type]
    assert not os.path.exists(stream_path)


@pytest.mark.parametrize(
    "arguments",
    [{"max_bytes": 0}, {"max_age": dt.timedelta(0)}, {"max_age": -1}, {"max_disk_usage": 1.5}, {"max_disk_usage": 0}],
)
def test_bad_retention_is_refused(arguments: dict[str, object]) -> None:
    """Retention limits out of range raise InvalidArgumentError that names the argument."""
    with pytest.raises(adiskq.InvalidArgumentError, match=f"Retention\\({next(iter(arguments))}="):
        adiskq.Retention(**arguments)  # type: ignore[arg-type]


def test_retention_age_may_be_seconds() -> None:
    """Retention(max_age=) takes seconds as well as a timedelta."""
    assert adiskq.Retention(max_age=90).max_age == dt.timedelta(seconds=90)
    assert adiskq.Retention(max_age=90).max_age_ns == 90 * 10**9


@pytest.mark.parametrize("reader", ["read", "stats", "offset_for_time"])
def test_readers_of_a_missing_stream_create_nothing(tmp_path: pathlib.Path, reader: str) -> None:
    """adiskq.read, stats and offset_for_time on a missing path raise StreamNotFoundError and create nothing."""
    path = tmp_path / "missing" / "stream"
    calls = {
        "read": lambda: adiskq.read(path, 0, 0),
        "stats": lambda: adiskq.stats(path),
        "offset_for_time": lambda: adiskq.offset_for_time(path, 0, 0),
    }
    with pytest.raises(adiskq.StreamNotFoundError, match="open a Producer there") as caught:
        calls[reader]()
    assert isinstance(caught.value, FileNotFoundError)
    assert os.listdir(tmp_path) == []


@pytest.mark.parametrize(
    ("make", "match"),
    [("file", "it is a file"), ("empty", r"no settings\.json"), ("foreign", r"no settings\.json")],
)
def test_readers_refuse_what_is_not_a_stream(tmp_path: pathlib.Path, make: str, match: str) -> None:
    """Readers pointed at a file, an empty folder or a foreign folder raise StreamNotFoundError and change nothing."""
    path = tmp_path / "target"
    if make == "file":
        path.write_bytes(b"x")
    else:
        path.mkdir()
        if make == "foreign":
            (path / "notes.txt").write_bytes(b"mine")
    before = snapshot(os.fspath(tmp_path))
    with pytest.raises(adiskq.StreamNotFoundError, match=match):
        adiskq.stats(path)
    assert snapshot(os.fspath(tmp_path)) == before


@pytest.mark.parametrize("where", ["parts", os.path.join("parts", "000001")])
def test_file_where_a_folder_belongs_is_refused(stream_path: str, where: str) -> None:
    """A regular file where the partitions' folder or a partition's folder belongs is a clear error."""
    write_stream(stream_path, [fields(1)], partitions=1)
    if where == "parts":
        shutil.rmtree(os.path.join(stream_path, "parts"))
    with open(os.path.join(stream_path, where), "wb") as file:
        file.write(b"in the way")
    before = snapshot(stream_path)
    with pytest.raises(adiskq.CorruptStreamError, match="is not a folder"):
        StreamWriter.open(stream_path, partitions=2)
    assert snapshot(stream_path) == before


def test_the_largest_max_message_bytes_is_what_readers_and_recovery_accept(stream_path: str) -> None:
    """max_message_bytes stops at 1 GiB: above it a push would succeed that readers refuse as damaged."""
    with pytest.raises(adiskq.InvalidArgumentError, match="1 GiB, the largest record readers"):
        adiskq.Producer(stream_path, max_message_bytes=2**31)
    StreamWriter.open(stream_path, max_message_bytes=2**30).close()  # the limit itself is fine
    assert adiskq.stats(stream_path).partitions[0].next_offset == 0


@pytest.mark.parametrize("seen", ["settings-appearing", "partitions-written"])
def test_a_stream_another_process_creates_meanwhile_is_opened(
    stream_path: str, monkeypatch: pytest.MonkeyPatch, seen: str
) -> None:
    """Several producers opening a new stream at once (``uvicorn --workers 4``): one finds the folder
    while another creates it, settings.json missing at its first look and there at its listing, or
    with messages already in the partitions; it opens the stream the other made, not refuses it."""
    write_stream(stream_path, [fields(1)] if seen == "partitions-written" else [], partitions=2)
    settings = os.path.join(stream_path, "settings.json")
    hidden = settings + ".hidden"
    os.rename(settings, hidden)  # as it was at the first look
    real_listdir = os.listdir

    def listdir_while_the_other_finishes(path: str) -> list[str]:
        names = real_listdir(path)
        if os.path.lexists(hidden):
            os.rename(hidden, settings)  # the other process writes settings.json meanwhile
            if seen == "settings-appearing":
                names.append("settings.json")
        return names

    monkeypatch.setattr(os, "listdir", listdir_while_the_other_finishes)
    writer = StreamWriter.open(stream_path, partitions=2)
    writer.close()
    monkeypatch.undo()
    assert adiskq.stats(stream_path).partitions[0].next_offset == (1 if seen == "partitions-written" else 0)
