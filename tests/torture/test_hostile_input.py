"""Hostile or careless input: names that leave the stream, planted links, huge messages, permissions."""

from __future__ import annotations

import os
import stat

import anyio
import pytest
from support.unprivileged import as_nobody

import adiskq
from adiskq._storage.offsets import load_offsets, save_offsets

pytestmark = pytest.mark.anyio


async def make_stream(path: str, *, partitions: int = 1, mode: int = 0o644, messages: int = 3) -> None:
    """A small stream to attack."""
    async with adiskq.Producer(path, partitions=partitions, mode=mode, segment_size_bytes=1024) as producer:
        for i in range(messages):
            await producer.push(b"message %d" % i, key="k")


def plant_link(link: str, target: str) -> None:
    """Replace `link` (if present) with a symbolic link to `target`."""
    if os.path.lexists(link):
        os.unlink(link)
    os.symlink(target, link)


def read_bytes(path: str) -> bytes:
    """The bytes of a file."""
    with open(path, "rb") as file:
        return file.read()


def write_victim(directory: str) -> str:
    """A file outside the stream that a planted link points at."""
    victim = os.path.join(directory, "victim")
    with open(victim, "wb") as file:
        file.write(b"precious")
    return victim


@pytest.mark.parametrize("name", ["../escape", "a/b", ".", "..", "/etc", "-rf", ".hidden", "x\n"])
def test_group_names_that_would_leave_the_groups_folder_stay_inside_it(stream_path: str, name: str) -> None:
    """A group id that is no plain folder name (a Kafka client may send any) is kept in one encoded
    folder inside groups/, read back under the same name, and nothing is written anywhere else."""
    anyio.run(make_stream, stream_path)
    before = set(os.listdir(stream_path))
    save_offsets(stream_path, name, {0: 1})
    assert load_offsets(stream_path, name) == {0: 1}
    assert set(os.listdir(stream_path)) - before <= {"groups"}
    (folder,) = os.listdir(os.path.join(stream_path, "groups"))
    assert folder.startswith("%")
    assert not os.path.exists(os.path.join(os.path.dirname(stream_path), "escape"))


def test_an_empty_group_name_is_refused(stream_path: str) -> None:
    """An empty group name holds no folder: InvalidNameError, and nothing is written."""
    anyio.run(make_stream, stream_path)
    with pytest.raises(adiskq.InvalidNameError, match="group name"):
        save_offsets(stream_path, "", {0: 1})
    with pytest.raises(adiskq.InvalidNameError):
        load_offsets(stream_path, "")
    assert not os.path.exists(os.path.join(stream_path, "groups"))


@pytest.mark.parametrize("partition", [-1, 1, 10**6, "../000000", "0", True, 1.0])
def test_partition_numbers_outside_the_stream_are_refused(stream_path: str, partition: object) -> None:
    """Only 0..N-1 name a partition; anything else is a clear InvalidArgumentError."""
    anyio.run(make_stream, stream_path)
    with pytest.raises(adiskq.InvalidArgumentError, match="partition"):
        adiskq.read(stream_path, partition, 0)  # type: ignore[arg-type]
    with pytest.raises(adiskq.InvalidArgumentError, match="partition"):
        adiskq.offset_for_time(stream_path, partition, 0)  # type: ignore[arg-type]


@pytest.mark.parametrize("extension", ["data", "index", "timeindex"])
async def test_a_planted_link_in_place_of_a_segment_file_is_never_followed(tmp_path: object, extension: str) -> None:
    """Readers and producers refuse a symlinked segment file, and its target is untouched."""
    stream = os.path.join(str(tmp_path), "stream")
    await make_stream(stream)
    victim = write_victim(str(tmp_path))
    plant_link(os.path.join(stream, "parts", "000000", f"00000000000000000000.{extension}"), victim)
    with pytest.raises(adiskq.CorruptStreamError, match="symbolic link"):
        async with adiskq.Producer(stream):
            pass
    if extension != "timeindex":  # a linked .index hides its segment from readers (a stray, not a segment)
        with pytest.raises((adiskq.CorruptStreamError, adiskq.OffsetOutOfRangeError)):
            adiskq.read(stream, 0, 0)
    assert read_bytes(victim) == b"precious"


async def test_a_planted_link_where_the_next_segment_goes_stops_the_roll(tmp_path: object) -> None:
    """A link named like the next segment makes the roll fail clearly, writing nothing through it."""
    stream = os.path.join(str(tmp_path), "stream")
    victim = write_victim(str(tmp_path))
    async with adiskq.Producer(stream, segment_size_bytes=1024) as producer:
        receipt = await producer.push(b"x" * 1100, key="k")  # fills the first segment
        plant_link(os.path.join(stream, "parts", "000000", f"{receipt.offset + 1:020d}.data"), victim)
        with pytest.raises(adiskq.CorruptStreamError, match="symbolic link"):
            await producer.push(b"y", key="k")
    assert read_bytes(victim) == b"precious"
    assert adiskq.read(stream, 0, receipt.offset).value == b"x" * 1100


async def test_a_partition_folder_replaced_by_a_link_is_refused(tmp_path: object) -> None:
    """A producer never writes through a symlinked partition folder."""
    stream = os.path.join(str(tmp_path), "stream")
    await make_stream(stream)
    elsewhere = os.path.join(str(tmp_path), "elsewhere")
    os.rename(os.path.join(stream, "parts", "000000"), elsewhere)
    os.symlink(elsewhere, os.path.join(stream, "parts", "000000"))
    with pytest.raises(adiskq.CorruptStreamError, match="symbolic link"):
        async with adiskq.Producer(stream):
            pass


async def test_huge_keys_headers_and_values_get_a_clear_error(stream_path: str) -> None:
    """Oversized parts of a message raise MessageTooLargeError (or ValueError), never MemoryError."""
    async with adiskq.Producer(stream_path, max_message_bytes=64 * 1024) as producer:
        with pytest.raises(adiskq.MessageTooLargeError, match="max_message_bytes"):
            await producer.push(b"v", key=b"k" * 100_000)
        with pytest.raises(adiskq.MessageTooLargeError, match="max_message_bytes"):
            await producer.push(b"v" * 100_000)
        with pytest.raises(adiskq.MessageTooLargeError, match="max_message_bytes"):
            await producer.push(b"v", headers={"h": b"x" * 100_000})
        with pytest.raises(ValueError, match=r"65535 headers|max_message_bytes"):
            await producer.push(b"v", headers={f"h{i}": b"" for i in range(70_000)})
        with pytest.raises(adiskq.MessageTooLargeError):
            await producer.push_many([adiskq.Record(b"v", headers={"h": b"x" * 100_000})])
        await producer.push(b"fine")
    assert adiskq.stats(stream_path).message_count == 1


async def test_files_are_created_with_the_mode_asked_for(stream_path: str) -> None:
    """mode=0o600 makes every file private to its owner (folders 0o700)."""
    old_umask = os.umask(0o022)
    try:
        await make_stream(stream_path, mode=0o600, messages=40)
        await anyio.to_thread.run_sync(lambda: save_offsets(stream_path, "billing", {0: 1}, mode=0o600))
    finally:
        os.umask(old_umask)
    files, folders = modes_under(stream_path)
    assert files
    assert set(files.values()) == {0o600}, files
    assert set(folders.values()) == {0o700}, folders


def modes_under(path: str) -> tuple[dict[str, int], dict[str, int]]:
    """Permission bits of every file and folder below `path`, and of `path` itself."""
    files: dict[str, int] = {}
    folders: dict[str, int] = {path: stat.S_IMODE(os.stat(path).st_mode)}
    for folder, subfolders, names in os.walk(path):
        for name in subfolders:
            folders[os.path.join(folder, name)] = stat.S_IMODE(os.stat(os.path.join(folder, name)).st_mode)
        for name in names:
            files[os.path.join(folder, name)] = stat.S_IMODE(os.stat(os.path.join(folder, name)).st_mode)
    return files, folders


def open_producer(path: str) -> str:
    """Try to open a producer; the error's text and notes, or 'opened'."""

    async def attempt() -> str:
        try:
            async with adiskq.Producer(path):
                return "opened"
        except OSError as error:
            return " ".join([f"{type(error).__name__}: {error}", *getattr(error, "__notes__", [])])

    return anyio.run(attempt)


async def test_a_read_only_stream_is_read_but_not_written_by_others(shared_dir: str) -> None:
    """Another user can read a stream but cannot open a producer on it, and is told why."""
    stream = os.path.join(shared_dir, "stream")
    await make_stream(stream)
    outcome = await anyio.to_thread.run_sync(
        lambda: as_nobody(lambda: (adiskq.read(stream, 0, 1).value, open_producer(stream)))
    )
    value, producer = outcome  # type: ignore[misc]
    assert value == b"message 1"
    assert producer.startswith("PermissionError")
    assert "needs write permission" in producer
    assert adiskq.stats(stream).message_count == 3
