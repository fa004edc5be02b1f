"""Streaming writes, exactly once per (checkpointLocation, batchId).

Spark runs a micro-batch as tasks that call ``write`` and then, on the driver, one ``commit(messages,
batchId)``; it records the batch in ``<checkpoint>/commits/<batchId>`` only after ``commit`` returned.
If the driver dies in between, or someone deletes that file, the restarted query runs the batch
again with the same ``batchId``. So the sink must recognise a batch it already appended, and it
must do so even if the crash came in the middle of its own ``commit``. How:

1. Tasks do not touch the stream. Each encodes its rows and writes them, grouped by partition, to a
   staging file under ``<checkpoint>/adiskq-sink/staging/`` (fsynced), and reports the file.
2. ``commit`` keeps one small record, ``<checkpoint>/adiskq-sink/state.json`` (replaced atomically
   and fsynced): the last batch committed and, while a commit is under way, its *intent*: the batch
   id, the staging files, and every partition's next offset when the append began.
3. ``commit(B)`` returns at once if ``B`` is already committed: a replayed batch is dropped (its new
   staging files are deleted). Otherwise it opens the stream as a shared writer (waiting up to
   ``lockTimeout`` while an exclusive producer holds it; shared ones, a live service's, write on
   beside it), takes the locks of the batch's partitions, writes the intent (each partition's next
   offset read under its lock, so the batch's records lie contiguous from there), appends the
   staged records, lets the partitions go, fsyncs, records ``B`` as committed (clearing the intent)
   and only then closes the stream and deletes the staging files.
4. If a commit finds an intent, the previous commit died after writing it. Its staging files are
   still there (they are deleted only after the batch is recorded). For each partition the records
   from the intent's start offset are compared, byte for byte, with the staged ones: the leading
   run that matches is what the crashed commit appended (records are written in order, and a torn
   tail is cut by recovery); the rest is appended now. The intent's batch is then recorded as
   committed, and the batch being committed now is dropped if it is the same one.

So every batch's rows are appended once: the intent's staged rows are the only rows ever appended
for that batch, a replay's rows are dropped, and completing an interrupted append never repeats a
record already there. The state lives beside Spark's own checkpoint, so deleting the checkpoint (a
new query, whose batch ids start at 0 again) starts afresh too. Spark 4.3 lets a Python data source
sink run in "append" or "complete" output mode (not "update"); every row the query outputs is
appended, so in "complete" mode each batch appends the whole result table.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
from collections.abc import Iterator, Mapping, Sequence
from typing import Final

import pyarrow as pa
from pyspark.sql.datasource import DataSourceStreamArrowWriter, WriterCommitMessage

from .._errors import CorruptStreamError
from .._sansio.entries import INDEX_ENTRY, INDEX_ENTRY_BYTES
from .._sansio.retention import DEFAULT_REFUSE_WRITES_ABOVE
from .._storage.columns import RawCursor
from .._storage.files import atomic_write_json, read_json
from .._storage.partition_reader import PartitionReader
from .._storage.stream import StreamWriter
from ._encode import Columns, Grouped
from ._options import WriteOptions
from ._staging import StagedRecords, load_staged, stage_in
from ._writer import StreamFacts, append_grouped, refuse_above_level

__all__ = ["AdiskqStreamWriter", "SinkCommitter", "StagedRecords", "stage"]

SINK_DIR: Final = "adiskq-sink"
STATE_FILE: Final = "state.json"
STAGING_DIR: Final = "staging"
_COMPARE_RUN: Final = 4096
_RESTORE_OR_RESTART: Final = "Restore the file, or start the query with a new checkpointLocation"


def sink_dir(checkpoint: str) -> str:
    """``<checkpoint>/adiskq-sink``."""
    return os.path.join(checkpoint, SINK_DIR)


def stage(checkpoint: str, grouped: Grouped) -> StagedRecords:
    """Write a task's records to a new staging file under the checkpoint, fsynced."""
    return stage_in(os.path.join(sink_dir(checkpoint), STAGING_DIR), grouped)


@dataclasses.dataclass(frozen=True, slots=True)
class _Intent:
    batch: int
    staged: tuple[StagedRecords, ...]
    partition_count: int
    start: dict[int, int]

    def to_json(self) -> dict[str, object]:
        return {
            "batch": self.batch,
            "staged": [item.to_json() for item in self.staged],
            "partitions": self.partition_count,
            "start": {str(p): offset for p, offset in sorted(self.start.items())},
        }

    @classmethod
    def from_json(cls, data: Mapping[str, object]) -> _Intent:
        staged = data["staged"]
        start = data["start"]
        batch = data["batch"]
        partitions = data["partitions"]
        if not (isinstance(staged, list) and isinstance(start, dict) and isinstance(batch, int)):
            raise ValueError("not an intent")
        if not isinstance(partitions, int):
            raise ValueError("not an intent")
        return cls(
            batch,
            tuple(StagedRecords.from_json(item) for item in staged),
            partitions,
            {int(p): int(offset) for p, offset in start.items()},
        )


@dataclasses.dataclass(frozen=True, slots=True)
class _State:
    committed: int | None = None
    intent: _Intent | None = None


class SinkCommitter:
    """The driver's side of a streaming write to one stream from one checkpoint."""

    def __init__(
        self,
        checkpoint: str,
        stream_path: str,
        lock_timeout: float,
        refuse_writes_above: float | None = DEFAULT_REFUSE_WRITES_ABOVE,
    ) -> None:
        self.directory = sink_dir(checkpoint)
        self.stream_path = stream_path
        self.lock_timeout = lock_timeout
        self.refuse_writes_above = refuse_writes_above

    @property
    def state_path(self) -> str:
        """``<checkpoint>/adiskq-sink/state.json``."""
        return os.path.join(self.directory, STATE_FILE)

    def load_state(self) -> _State:
        """The last committed batch and the intent of an unfinished commit."""
        try:
            data = read_json(self.state_path)
        except FileNotFoundError:
            return _State()
        except ValueError as error:
            raise CorruptStreamError(f"{self.state_path} is not valid JSON ({error})") from None
        try:
            if not isinstance(data, dict):
                raise ValueError("not an object")
            committed = data.get("committed_batch")
            intent = data.get("intent")
            return _State(
                committed if isinstance(committed, int) else None,
                _Intent.from_json(intent) if isinstance(intent, dict) else None,
            )
        except (KeyError, TypeError, ValueError) as error:
            raise CorruptStreamError(
                f"{self.state_path} is damaged ({error}); start the query with a new checkpointLocation"
            ) from None

    def save_state(self, state: _State) -> None:
        """Replace ``state.json`` atomically and durably."""
        os.makedirs(self.directory, exist_ok=True)
        atomic_write_json(
            self.state_path,
            {
                "stream": self.stream_path,
                "committed_batch": state.committed,
                "intent": None if state.intent is None else state.intent.to_json(),
            },
        )

    def commit(self, batch_id: int, staged: Sequence[StagedRecords]) -> bool:
        """Append a micro-batch's staged rows unless that batch is committed; True if appended now."""
        state = self.load_state()
        if state.intent is None and state.committed is not None and batch_id <= state.committed:
            self.discard(staged)  # a replayed batch
            return False
        if state.intent is None and not any(item.layout for item in staged):
            self.save_state(_State(batch_id))  # nothing to append: no need for the lock
            self.discard(staged)
            return True
        writer = StreamWriter.open(self.stream_path, lock_timeout=self.lock_timeout, shared=True)
        try:
            if state.intent is not None:
                self._finish(writer, state.intent)
                state = _State(state.intent.batch)
                self.save_state(state)
            appended = state.committed is None or batch_id > state.committed
            if appended:
                # Refused before its intent is saved: nothing of this batch is written, and Spark
                # runs the commit again when the query restarts. (An earlier intent is finished
                # above regardless: those rows were promised before the disk filled.)
                refuse_above_level(self.stream_path, self.refuse_writes_above)
                partition_count = writer.settings.partition_count
                grouped = load_staged(staged, partition_count, if_missing=_RESTORE_OR_RESTART)
                # The partitions' locks are held from reading where the batch starts to its last
                # record, so its records lie contiguous from the intent's start in each partition.
                with writer.appending(grouped.records):
                    start = {p: writer.partitions[p].next_offset for p in grouped.records}
                    # The intent is durable before the first record is appended (see the module docstring).
                    intent = _Intent(batch_id, tuple(staged), partition_count, start)
                    self.save_state(_State(state.committed, intent))
                    append_grouped(writer, grouped.records)
                writer.sync()
                self.save_state(_State(batch_id))
        finally:
            writer.close()
        self._clean_staging()  # with no intent left, no staging file will be appended any more
        return appended

    def _finish(self, writer: StreamWriter, intent: _Intent) -> None:
        """Append what an interrupted commit of ``intent`` had not appended yet."""
        grouped = load_staged(intent.staged, intent.partition_count, if_missing=_RESTORE_OR_RESTART)
        landed = {}
        with writer.appending(grouped.records):
            # The crashed commit's records lie contiguous from the intent's start (it held the
            # locks); shared writers may have appended after them since.
            for partition, records in grouped.records.items():
                landed[partition] = self._matching_prefix(writer, partition, intent.start[partition], records)
            append_grouped(writer, grouped.records, skip=landed)
        writer.sync()

    def _matching_prefix(self, writer: StreamWriter, partition: int, start: int, records: Sequence[bytes]) -> int:
        """How many of ``records`` lie in the partition from ``start`` on, byte for byte."""
        reader = PartitionReader(writer.partitions[partition].directory, partition)
        matched = 0
        with RawCursor(reader, start) as cursor:
            while matched < len(records):
                run = cursor.read(min(_COMPARE_RUN, len(records) - matched))
                if run is None:
                    return matched
                position = 0
                for index in range(run.message_count):
                    _, _, size = INDEX_ENTRY.unpack_from(run.entries, index * INDEX_ENTRY_BYTES)
                    if run.data[position : position + size] != records[matched]:
                        return matched
                    position += size
                    matched += 1
        return matched

    def discard(self, staged: Sequence[StagedRecords]) -> None:
        """Delete staging files that will not be appended: never one a pending intent names.

        Spark calls ``abort`` (which lands here) when ``commit`` raised, also when the commit failed
        after writing its intent (a full disk part-way through the append). The next commit finishes
        that intent from its staging files, so they must outlive the abort.
        """
        try:
            intent = self.load_state().intent
        except CorruptStreamError:
            return  # the state cannot be read: keep every file the next commit might need
        pending = set() if intent is None else {item.path for item in intent.staged}
        for item in staged:
            if item.path in pending:
                continue
            with contextlib.suppress(FileNotFoundError):
                os.unlink(item.path)

    def _clean_staging(self) -> None:
        """Delete every staging file: with no intent pending, none of them will be appended."""
        directory = os.path.join(self.directory, STAGING_DIR)
        with contextlib.suppress(FileNotFoundError):
            for name in os.listdir(directory):
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(os.path.join(directory, name))


class AdiskqStreamWriter(DataSourceStreamArrowWriter):
    """``df.writeStream.format("adiskq")``: exactly once per (checkpointLocation, batchId)."""

    def __init__(self, options: WriteOptions, checkpoint: str, columns: Columns, facts: StreamFacts) -> None:
        self.options = options
        self.checkpoint = checkpoint
        self.columns = columns
        self.facts = facts

    def write(self, iterator: Iterator[pa.RecordBatch]) -> StagedRecords:
        """Encode the task's rows into a staging file; ``commit`` appends them."""
        grouped = Grouped(self.facts.partition_count)
        for batch in iterator:
            grouped.encode(batch, self.columns, self.facts.max_message_bytes)
        return stage(self.checkpoint, grouped)

    def _committer(self) -> SinkCommitter:
        return SinkCommitter(
            self.checkpoint, self.options.path, self.options.lock_timeout, self.options.refuse_writes_above
        )

    def commit(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        """Append the batch's staged rows, once."""
        staged = [m for m in messages if isinstance(m, StagedRecords)]
        self._committer().commit(batchId, staged)

    def abort(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        """Drop the staged rows of a failed batch (Spark runs it again)."""
        self._committer().discard([m for m in messages if isinstance(m, StagedRecords)])
