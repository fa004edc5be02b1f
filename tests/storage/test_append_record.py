"""The inline push's two writes: the compiled ``append_record`` and ``append_one`` against their references.

``adiskq/_csrc/log/append.c`` writes a record to ``.data`` and its entry to ``.index`` in one call (the one
I/O of the compiled core); ``append_one`` also notes the record's buffered entries in the segment's
lists. Each and its reference (``append.append_record_reference``, ``append.append_one_reference``)
must leave the same bytes in the files and the lists, make the same ``write`` calls when a test
replaces ``os.write`` (short writes, errors), and fail the same way, marking an error that came after
the record went in with ``index_entry``.
The compiled module is imported directly, so this runs under either core.
"""

from __future__ import annotations

import contextlib
import errno
import os
import pathlib
import signal
import threading
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from adiskq import _compiled
from adiskq._sansio.entries import INDEX_ENTRY, TIMEINDEX_ENTRY
from adiskq._storage.append import append_one_reference, append_record_reference

Append = Callable[..., None]
BOTH: list[tuple[str, Append]] = [("compiled", _compiled.append_record), ("reference", append_record_reference)]
BOTH_ONE: list[tuple[str, Append]] = [("compiled", _compiled.append_one), ("reference", append_one_reference)]


class ScriptedWrite:
    """An ``os.write`` stand-in: notes every call; the n-th call (from 1) writes only ``short`` bytes
    or raises ``fail`` instead."""

    def __init__(self, plan: dict[int, int | OSError | BaseException]) -> None:
        self.plan = plan
        self.calls: list[tuple[int, bytes]] = []

    def __call__(self, fd: int, data: bytes) -> int:
        self.calls.append((fd, bytes(data)))
        step = self.plan.get(len(self.calls))
        if isinstance(step, BaseException):
            raise step
        count = len(data) if step is None else step
        return os.write(fd, bytes(data)[:count])


def _files(tmp_path: pathlib.Path, name: str) -> tuple[int, int]:
    data = os.open(tmp_path / f"{name}.data", os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    index = os.open(tmp_path / f"{name}.index", os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    return data, index


def _run(
    tmp_path: pathlib.Path, name: str, append: Append, write: Any, records: list[tuple[bytes, int, int]]
) -> tuple[object, bytes, bytes]:
    """Append each record; returns the error (type, errno, index_entry) or None, and the two files."""
    data_fd, index_fd = _files(tmp_path, name)
    outcome: object = None
    try:
        for record, offset, position in records:
            append(write, data_fd, index_fd, record, offset, position)
    except BaseException as error:  # every error, KeyboardInterrupt too, is compared
        outcome = (type(error).__name__, getattr(error, "errno", None), getattr(error, "index_entry", False))
    finally:
        os.close(data_fd)
        os.close(index_fd)
    return outcome, (tmp_path / f"{name}.data").read_bytes(), (tmp_path / f"{name}.index").read_bytes()


record_lists = st.lists(
    st.tuples(st.binary(min_size=1, max_size=200), st.integers(0, 2**64 - 1), st.integers(0, 2**64 - 1)),
    min_size=1,
    max_size=5,
)


@settings(max_examples=60, deadline=None)
@given(records=record_lists)
def test_both_write_the_record_then_its_entry(tmp_path_factory: pytest.TempPathFactory, records: list[Any]) -> None:
    tmp_path = tmp_path_factory.mktemp("append")
    for name, append in BOTH:
        error, data, index = _run(tmp_path, name, append, os.write, records)
        assert error is None
        assert data == b"".join(record for record, _, _ in records)
        assert index == b"".join(INDEX_ENTRY.pack(o, p, len(r)) for r, o, p in records)


plans = st.dictionaries(
    st.integers(1, 6),
    st.one_of(
        st.integers(0, 3),  # a short write of this many bytes (0: nothing yet, the rest follows)
        st.sampled_from([OSError(errno.ENOSPC, "full"), OSError(errno.EIO, "broken"), OSError(errno.EFBIG, "big")]),
        st.just(KeyboardInterrupt()),
    ),
    max_size=3,
)


@settings(max_examples=150, deadline=None)
@given(records=record_lists, plan=plans)
def test_short_writes_and_errors_go_through_the_same_calls(
    tmp_path_factory: pytest.TempPathFactory, records: list[Any], plan: dict[int, Any]
) -> None:
    """A replaced ``os.write`` (what the fault-injection tests install) sees the same calls from
    both, and both fail the same way: an error after the record went in says ``index_entry``."""
    tmp_path = tmp_path_factory.mktemp("append")
    seen = []
    for name, append in BOTH:
        write = ScriptedWrite(plan)
        seen.append((*_run(tmp_path, name, append, write, records), [len(data) for _, data in write.calls]))
    assert seen[0] == seen[1]


def test_the_entry_error_is_marked_and_the_record_error_is_not(tmp_path: pathlib.Path) -> None:
    for name, append in BOTH:
        failed_record = ScriptedWrite({1: OSError(errno.ENOSPC, "full")})
        assert _run(tmp_path, f"{name}-1", append, failed_record, [(b"abc", 0, 0)]) == (
            ("OSError", errno.ENOSPC, False),
            b"",
            b"",
        )
        failed_entry = ScriptedWrite({2: OSError(errno.EIO, "broken")})
        assert _run(tmp_path, f"{name}-2", append, failed_entry, [(b"abc", 0, 0)]) == (
            ("OSError", errno.EIO, True),
            b"abc",
            b"",
        )


def test_the_real_write_reports_the_disk_error(tmp_path: pathlib.Path) -> None:
    """Without a replacement the compiled one calls write(2) itself: a bad descriptor is EBADF."""
    data_fd, index_fd = _files(tmp_path, "real")
    os.close(data_fd)
    try:
        for _, append in BOTH:
            with pytest.raises(OSError, match="Bad file descriptor") as caught:
                append(os.write, data_fd, index_fd, b"abc", 0, 0)
            assert caught.value.errno == errno.EBADF
            assert not getattr(caught.value, "index_entry", False)
    finally:
        os.close(index_fd)


@pytest.mark.parametrize(
    "arguments",
    [
        (os.write, 1, 2, "text", 0, 0),
        (os.write, 1, 2, b"x", -1, 0),
        (os.write, -1, 2, b"x", 0, 0),
        (os.write, 1, 2, b"x", 0),
    ],
)
def test_the_compiled_one_refuses_bad_arguments(arguments: tuple[Any, ...]) -> None:
    with pytest.raises((TypeError, ValueError, OverflowError)):
        _compiled.append_record(*arguments)


def test_a_write_that_claims_too_much_is_refused(tmp_path: pathlib.Path) -> None:
    data_fd, index_fd = _files(tmp_path, "liar")
    try:
        for _, append in BOTH:
            with pytest.raises(ValueError, match="impossible byte count"):
                append(lambda fd, data: len(data) + 1, data_fd, index_fd, b"abc", 0, 0)
    finally:
        os.close(data_fd)
        os.close(index_fd)


class _Interrupted(Exception):
    pass


@contextlib.contextmanager
def _blocked_write_and_alarm(
    tmp_path: pathlib.Path, name: str, handler: Callable[..., None]
) -> Iterator[tuple[int, int, int]]:
    """A pipe standing in for .data whose buffer is full (a write to it blocks until the other end
    reads), the .index file, and SIGALRM going to ``handler`` 50 ms from now; all undone after."""
    read_end, write_end = os.pipe()
    os.set_blocking(write_end, False)
    with contextlib.suppress(BlockingIOError):
        while True:
            os.write(write_end, bytes(65536))
    os.set_blocking(write_end, True)
    data_fd, index_fd = _files(tmp_path, name)
    os.close(data_fd)
    previous = signal.signal(signal.SIGALRM, handler)
    try:
        signal.setitimer(signal.ITIMER_REAL, 0.05)
        yield read_end, write_end, index_fd
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
        for fd in (read_end, write_end, index_fd):
            os.close(fd)


@pytest.mark.parametrize(("name", "append"), BOTH)
def test_a_signal_during_a_blocked_write_runs_its_handler_and_the_write_goes_on(
    tmp_path: pathlib.Path, name: str, append: Append
) -> None:
    """EINTR: the handler runs (PEP 475, as os.write), then the write continues where it was."""
    handled = threading.Event()
    drained = bytearray()
    with _blocked_write_and_alarm(tmp_path, name, lambda *_: handled.set()) as (read_end, write_end, index_fd):

        def drain() -> None:
            handled.wait(timeout=30)
            while not drained.endswith(b"abc"):
                drained.extend(os.read(read_end, 1 << 20))

        reader = threading.Thread(target=drain)
        reader.start()
        try:
            append(os.write, write_end, index_fd, b"abc", 7, 9)
        finally:
            reader.join(timeout=30)
    assert handled.is_set()
    assert drained.endswith(b"abc")
    assert (tmp_path / f"{name}.index").read_bytes() == INDEX_ENTRY.pack(7, 9, 3)


@pytest.mark.parametrize(("name", "append"), BOTH)
def test_an_exception_from_the_signal_handler_fails_the_write(
    tmp_path: pathlib.Path, name: str, append: Append
) -> None:
    def interrupt(*_: object) -> None:
        raise _Interrupted

    with (
        _blocked_write_and_alarm(tmp_path, name, interrupt) as (_, write_end, index_fd),
        pytest.raises(_Interrupted) as caught,
    ):
        append(os.write, write_end, index_fd, b"abc", 0, 0)
    assert not getattr(caught.value, "index_entry", False)  # the record's write failed, not its entry
    assert (tmp_path / f"{name}.index").read_bytes() == b""


# append_one: a record, its .index entry, and its buffered entries noted.

Appended = tuple[bytes, int, int, int, bytes, int]  # record, offset, position, timestamp_ns, tag entry, key hash


def _run_one(
    tmp_path: pathlib.Path, name: str, append: Append, write: Any, records: list[Appended], keys: bool
) -> tuple[object, bytes, bytes, list[bytes], list[bytes], list[int] | None]:
    """Append each with ``append_one``; the error (as ``_run``), the two files and the three lists."""
    data_fd, index_fd = _files(tmp_path, name)
    times: list[bytes] = []
    tags: list[bytes] = []
    hashes: list[int] | None = [] if keys else None
    outcome: object = None
    try:
        for record, offset, position, stamp, tag, key_hash in records:
            append(write, data_fd, index_fd, record, offset, position, stamp, times, tag, tags, key_hash, hashes)
    except BaseException as error:
        outcome = (type(error).__name__, getattr(error, "errno", None), getattr(error, "index_entry", False))
    finally:
        os.close(data_fd)
        os.close(index_fd)
    data = (tmp_path / f"{name}.data").read_bytes()
    return outcome, data, (tmp_path / f"{name}.index").read_bytes(), times, tags, hashes


appended_lists = st.lists(
    st.tuples(
        st.binary(min_size=1, max_size=200),
        st.integers(0, 2**64 - 1),
        st.integers(0, 2**64 - 1),
        st.integers(-(2**63), 2**63 - 1),
        st.binary(min_size=4, max_size=4),
        st.integers(0, 2**32 - 1),
    ),
    min_size=1,
    max_size=5,
)


@settings(max_examples=60, deadline=None)
@given(records=appended_lists, keys=st.booleans())
def test_append_one_writes_and_notes_the_same(
    tmp_path_factory: pytest.TempPathFactory, records: list[Appended], keys: bool
) -> None:
    """Both write the record then its entry, and note its time, tag and key entries in that order."""
    tmp_path = tmp_path_factory.mktemp("append_one")
    for name, append in BOTH_ONE:
        error, data, index, times, tags, hashes = _run_one(tmp_path, name, append, os.write, records, keys)
        assert error is None
        assert data == b"".join(r[0] for r in records)
        assert index == b"".join(INDEX_ENTRY.pack(r[1], r[2], len(r[0])) for r in records)
        assert times == [TIMEINDEX_ENTRY.pack(r[1], r[3]) for r in records]
        assert tags == [r[4] for r in records]
        assert hashes == ([r[5] for r in records] if keys else None)


@settings(max_examples=150, deadline=None)
@given(records=appended_lists, plan=plans, keys=st.booleans())
def test_append_one_fails_like_its_reference(
    tmp_path_factory: pytest.TempPathFactory, records: list[Appended], plan: dict[int, Any], keys: bool
) -> None:
    """Through a replaced ``os.write`` both make the same calls, fail the same way, and note only
    the records whose two writes were made."""
    tmp_path = tmp_path_factory.mktemp("append_one")
    seen = []
    for name, append in BOTH_ONE:
        write = ScriptedWrite(plan)
        seen.append((*_run_one(tmp_path, name, append, write, records, keys), [len(d) for _, d in write.calls]))
    assert seen[0] == seen[1]


GOOD: tuple[Any, ...] = (b"abc", 3, 10, 99, b"\x01\x02\x03\x04", 7)


@pytest.mark.parametrize(
    "change",
    [
        {0: "text"},  # a record that is not bytes
        {0: bytearray(b"abc")},
        {1: -1},  # an offset out of u64
        {1: 2**64},
        {1: 1.0},
        {2: -5},  # a position out of u64
        {2: "0"},
        {3: 2**63},  # a timestamp out of i64
        {3: -(2**63) - 1},
        {3: None},
        {4: b"\x00" * 3},  # a tag entry that is not 4 bytes
        {4: "tags"},
        {5: -1},  # a key hash out of u32
        {5: 2**32},
        {5: True},
        {5: 7.0},
    ],
)
def test_append_one_refuses_what_its_reference_refuses(tmp_path: pathlib.Path, change: dict[int, Any]) -> None:
    """A bad argument raises the same error from both, before anything is written or noted."""
    arguments = list(GOOD)
    for at, value in change.items():
        arguments[at] = value
    seen = []
    for name, append in BOTH_ONE:
        seen.append(_run_one(tmp_path, name, append, os.write, [tuple(arguments)], keys=True))  # type: ignore[list-item]
    assert seen[0] == seen[1]
    assert seen[0][0] is not None
    assert seen[0][1:] == (b"", b"", [], [], [])


@pytest.mark.parametrize(("name", "append"), BOTH_ONE)
def test_append_one_refuses_buffers_that_are_not_lists(tmp_path: pathlib.Path, name: str, append: Append) -> None:
    """Buffers of another type (a tuple, a bytearray) are refused before anything is written."""
    data_fd, index_fd = _files(tmp_path, name)
    try:
        for times, tags, hashes in (((), [], []), ([], bytearray(), []), ([], [], ())):
            with pytest.raises(TypeError):
                append(os.write, data_fd, index_fd, b"abc", 0, 0, 0, times, bytes(4), tags, 0, hashes)
    finally:
        os.close(data_fd)
        os.close(index_fd)
    assert (tmp_path / f"{name}.data").read_bytes() == b""
