"""The error tree: every error is an adiskq.Error, matches its builtin, and survives pickling."""

from __future__ import annotations

import pickle

import pytest

import adiskq

ERRORS: list[adiskq.Error] = [
    adiskq.StreamNotFoundError("/s", "the folder has no settings.json"),
    adiskq.NotAStreamError("/s", "it is a file, not a folder"),
    adiskq.StreamLockedError("/s", "pid 7 on host 'box'"),
    adiskq.SettingsMismatchError("fewer partitions"),
    adiskq.CorruptStreamError("settings.json is damaged"),
    adiskq.CorruptRecordError("CRC-32C mismatch", path="/s/x.data", position=4711),
    adiskq.OffsetOutOfRangeError("gone", partition=1, offset=2, oldest_offset=3, next_offset=9),
    adiskq.MessageTooLargeError("too large"),
    adiskq.InvalidNameError("bad name"),
    adiskq.InvalidArgumentError("bad argument"),
    adiskq.ClosedError("closed"),
]


@pytest.mark.parametrize("error", ERRORS, ids=lambda e: type(e).__name__)
def test_errors_survive_pickling(error: adiskq.Error) -> None:
    """An error pickled (as multiprocessing and Spark do) comes back with its type, message and fields."""
    copy = pickle.loads(pickle.dumps(error))
    assert type(copy) is type(error)
    assert str(copy) == str(error)
    assert vars(copy) == vars(error)


@pytest.mark.parametrize(
    ("error", "builtin"),
    [
        (adiskq.StreamNotFoundError, FileNotFoundError),
        (adiskq.NotAStreamError, ValueError),
        (adiskq.SettingsMismatchError, ValueError),
        (adiskq.OffsetOutOfRangeError, IndexError),
        (adiskq.MessageTooLargeError, ValueError),
        (adiskq.InvalidNameError, ValueError),
        (adiskq.InvalidArgumentError, ValueError),
        (adiskq.ClosedError, RuntimeError),
        (adiskq.CorruptRecordError, adiskq.CorruptStreamError),
    ],
)
def test_errors_subclass_their_builtin(error: type[adiskq.Error], builtin: type[Exception]) -> None:
    """Each error is an adiskq.Error and also the builtin a caller would catch."""
    assert issubclass(error, adiskq.Error)
    assert issubclass(error, builtin)


def test_corrupt_record_error_names_file_and_position() -> None:
    """A corrupt record's message names the file, the byte position and what to do."""
    error = adiskq.CorruptRecordError("CRC-32C mismatch", path="/s/a.data", position=10).with_path("/s/b.data", 100)
    assert (error.path, error.position) == ("/s/b.data", 110)
    assert str(error) == (
        "corrupt record in /s/b.data at byte 110: CRC-32C mismatch. Run `adiskq check` on the stream to list the damage"
    )
