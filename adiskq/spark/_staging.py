"""Rows encoded by Spark tasks, staged in files until the driver appends them.

A staging file holds a task's records grouped by partition, back to back, exactly as they will be
appended (each record already checked and encoded, CRC included); ``StagedRecords.layout`` says how
many records and bytes each partition has, in file order. Tasks write these files, fsynced, and
report them to the driver; only the driver's commit appends them, after every task succeeded, so a
job that fails (a bad row in any task) appends nothing. Every staged record is scanned again (size,
magic, CRC) when it is loaded, so a damaged staging file never reaches a stream.
"""

from __future__ import annotations

import dataclasses
import os
import uuid
from collections.abc import Mapping, Sequence

from pyspark.sql.datasource import WriterCommitMessage

from .._errors import CorruptRecordError, CorruptStreamError
from .._sansio.core import scan_records
from .._storage.files import fsync_dir, write_all
from ._encode import Grouped

__all__ = ["StagedRecords", "load_staged", "stage_in"]


@dataclasses.dataclass(frozen=True)
class StagedRecords(WriterCommitMessage):
    """A task's staged rows: a file with each partition's records back to back, in ``layout`` order."""

    path: str
    layout: tuple[tuple[int, int, int], ...]  # (partition, records, bytes)
    partition_count: int  # the count the records were placed for

    def to_json(self) -> dict[str, object]:
        """As the intent in ``state.json`` keeps it."""
        return {"path": self.path, "layout": [list(part) for part in self.layout], "partitions": self.partition_count}

    @classmethod
    def from_json(cls, data: Mapping[str, object]) -> StagedRecords:
        """From the intent in ``state.json``."""
        layout = data["layout"]
        count = data["partitions"]
        path = data["path"]
        if not isinstance(layout, list) or not isinstance(count, int) or not isinstance(path, str):
            raise ValueError("not a staged file")
        return cls(path, tuple((int(p), int(n), int(size)) for p, n, size in layout), count)


def stage_in(directory: str, grouped: Grouped) -> StagedRecords:
    """Write a task's records to a new staging file in ``directory`` (made if missing), fsynced."""
    os.makedirs(directory, exist_ok=True)
    path = os.path.join(directory, f"{uuid.uuid4().hex}.records")
    layout = []
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o644)
    try:
        for partition in sorted(grouped.records):
            records = grouped.records[partition]
            data = b"".join(records)
            write_all(fd, data)
            layout.append((partition, len(records), len(data)))
        os.fsync(fd)
    finally:
        os.close(fd)
    fsync_dir(directory)
    return StagedRecords(path, tuple(layout), grouped.partition_count)


def load_staged(staged: Sequence[StagedRecords], partition_count: int, *, if_missing: str) -> Grouped:
    """The records of staging files, in file order, placed for ``partition_count`` partitions;
    ``if_missing`` is what the error for a staging file that is gone tells the user to do."""
    grouped = Grouped(partition_count)
    for item in staged:
        try:
            with open(item.path, "rb") as file:
                data = file.read()
        except FileNotFoundError:
            raise CorruptStreamError(
                f"the staged rows {item.path!r} are gone, so adiskq cannot append them. {if_missing}"
            ) from None
        position = 0
        part = Grouped(item.partition_count)
        for partition, count, size in item.layout:
            chunk = data[position : position + size]
            # Every staged record is checked (size, magic, CRC) before it can reach the stream.
            try:
                extents = list(scan_records(chunk))
            except CorruptRecordError as error:
                raise error.with_path(item.path, position) from None
            if len(extents) != count or sum(extent.size for extent in extents) != size:
                raise CorruptRecordError(
                    f"the staged rows of partition {partition} are cut short", path=item.path, position=position
                )
            for extent in extents:
                part.add(partition, chunk[extent.position : extent.position + extent.size])
            position += size
        placed = part.regrouped(partition_count)
        for partition in sorted(placed.records):
            for record in placed.records[partition]:
                grouped.add(partition, record)
    return grouped
