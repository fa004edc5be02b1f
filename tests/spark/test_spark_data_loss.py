"""failOnDataLoss on every read path: planned offsets that are gone when a task reads them fail the
read, or are skipped with a warning, alike with and without the ``tags`` option (batch and streaming
reads both read their ranges through ``read_range``)."""

from __future__ import annotations

import logging

import anyio
import pyarrow as pa
import pytest
from support.spark import delete_oldest_segment

import adiskq
from adiskq.spark._reader import OffsetRange, read_range

COUNT = 60
TAG_OPTIONS = [pytest.param(None, id="untagged"), pytest.param(frozenset({"a"}), id="tags")]


def push_tagged(path: str) -> None:
    async def push() -> None:
        async with adiskq.Producer(path, partitions=1, segment_size_bytes=1024) as producer:
            for i in range(COUNT):
                await producer.push(b"m%d" % i, key="k", tag="a")

    anyio.run(push)


def offsets_read(path: str, split: OffsetRange, *, fail_on_data_loss: bool, tags: frozenset[str] | None) -> list[int]:
    batches = list(read_range(path, split, fail_on_data_loss=fail_on_data_loss, tags=tags))
    return pa.Table.from_batches(batches).column("offset").to_pylist() if batches else []


@pytest.mark.parametrize("tags", TAG_OPTIONS)
def test_offsets_retention_deleted_before_the_read_fail_it(stream_path: str, tags: frozenset[str] | None) -> None:
    """failOnDataLoss=true (the default): planned offsets deleted meanwhile fail the read, saying how to go on."""
    push_tagged(stream_path)
    oldest = delete_oldest_segment(stream_path)
    with pytest.raises(adiskq.OffsetOutOfRangeError, match=rf"offsets 0..{oldest - 1} .* deleted by retention") as info:
        offsets_read(stream_path, OffsetRange(0, 0, COUNT), fail_on_data_loss=True, tags=tags)
    assert "failOnDataLoss=false" in str(info.value)


@pytest.mark.parametrize("tags", TAG_OPTIONS)
def test_without_fail_on_data_loss_deleted_offsets_are_skipped_with_a_warning(
    stream_path: str, tags: frozenset[str] | None, caplog: pytest.LogCaptureFixture
) -> None:
    """failOnDataLoss=false: the read goes on from the oldest offset still there and logs what it skipped."""
    push_tagged(stream_path)
    oldest = delete_oldest_segment(stream_path)
    with caplog.at_level(logging.WARNING, logger="adiskq.spark"):
        got = offsets_read(stream_path, OffsetRange(0, 0, COUNT), fail_on_data_loss=False, tags=tags)
    assert got == list(range(oldest, COUNT))
    assert f"offsets 0..{oldest - 1} of partition 0 were deleted by retention" in caplog.text


@pytest.mark.parametrize("tags", TAG_OPTIONS)
def test_planned_offsets_a_crash_took_back_fail_the_read(stream_path: str, tags: frozenset[str] | None) -> None:
    """Offsets planned but no longer in the stream (recovery cut them) fail the read by default."""
    push_tagged(stream_path)
    with pytest.raises(adiskq.OffsetOutOfRangeError, match=rf"offsets {COUNT}..{COUNT + 9}.*a crash took them back"):
        offsets_read(stream_path, OffsetRange(0, 0, COUNT + 10), fail_on_data_loss=True, tags=tags)


@pytest.mark.parametrize("tags", TAG_OPTIONS)
def test_without_fail_on_data_loss_offsets_a_crash_took_back_are_skipped_with_a_warning(
    stream_path: str, tags: frozenset[str] | None, caplog: pytest.LogCaptureFixture
) -> None:
    """failOnDataLoss=false: the messages that are there are read, and the missing ones are logged."""
    push_tagged(stream_path)
    with caplog.at_level(logging.WARNING, logger="adiskq.spark"):
        got = offsets_read(stream_path, OffsetRange(0, 0, COUNT + 10), fail_on_data_loss=False, tags=tags)
    assert got == list(range(COUNT))
    assert f"offsets {COUNT}..{COUNT + 9} of partition 0 are no longer in the stream" in caplog.text
