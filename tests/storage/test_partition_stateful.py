"""A stateful Hypothesis test of PartitionWriter/PartitionReader against an in-memory list."""

from __future__ import annotations

import os
import shutil
import tempfile

from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule
from support.storage import encode, expected_messages, read_all

from adiskq._sansio.entries import INDEX_ENTRY, INDEX_ENTRY_BYTES
from adiskq._sansio.values import Message
from adiskq._storage.partition_reader import PartitionReader
from adiskq._storage.partition_writer import PartitionWriter

SEGMENT_SIZE_BYTES = 1024

records = st.tuples(
    st.binary(max_size=120),
    st.binary(max_size=16),
    st.integers(min_value=-(2**63), max_value=2**63 - 1),
    st.dictionaries(st.text(max_size=4), st.binary(max_size=8), max_size=2),
)


class PartitionMachine(RuleBasedStateMachine):
    """What reads back always equals the list of everything appended, minus the vacuumed prefix."""

    def __init__(self) -> None:
        super().__init__()
        self.root = tempfile.mkdtemp(prefix="adiskq-stateful-")
        self.directory = os.path.join(self.root, "000000")
        self.model: list[tuple[bytes, bytes, int, dict[str, bytes]]] = []
        self.oldest = 0
        self.writer = self._open()

    def _open(self) -> PartitionWriter:
        writer, _ = PartitionWriter.open(self.directory, 0, segment_size_bytes=SEGMENT_SIZE_BYTES)
        return writer

    def teardown(self) -> None:
        self.writer.close()
        shutil.rmtree(self.root)

    @rule(batch=st.lists(records, min_size=1, max_size=12))
    def append(self, batch: list[tuple[bytes, bytes, int, dict[str, bytes]]]) -> None:
        """Append a batch: it gets the next offsets (rolling first if the segment is full)."""
        assert self.writer.append(*encode(batch)) == len(self.model)
        self.model.extend(batch)

    @rule()
    def roll(self) -> None:
        """Seal the active segment and start a new one (nothing happens if it is empty)."""
        self.writer.roll()

    @rule(count=st.integers(min_value=1, max_value=3))
    def vacuum(self, count: int) -> None:
        """Delete the oldest sealed segments."""
        infos = self.writer.segment_infos()[:-1][:count]
        if not infos:
            return
        report = self.writer.delete_segments([info.base_offset for info in infos])
        assert report.removed_messages == infos[-1].next_offset - infos[0].base_offset
        self.oldest = infos[-1].next_offset

    @rule()
    def reopen(self) -> None:
        """Close cleanly and open again."""
        self.writer.close()
        self.writer = self._open()

    def _crash(self) -> tuple[str, list[tuple[int, int]]]:
        """Close without syncing; the active segment's data path and its (position, size) entries."""
        active = self.writer.active
        path = os.path.join(self.directory, f"{active.base_offset:020d}.data")
        with open(os.path.join(self.directory, f"{active.base_offset:020d}.index"), "rb") as file:
            raw = file.read()
        entries = [INDEX_ENTRY.unpack_from(raw, i)[1:] for i in range(0, len(raw), INDEX_ENTRY_BYTES)]
        self.writer.close()
        return path, entries

    @precondition(lambda self: self.writer.active.data_size > 0)
    @rule(data=st.data())
    def cut_tail_and_reopen(self, data: st.DataObject) -> None:
        """A crash tore the active segment's data: what remains whole survives, the rest is gone."""
        path, entries = self._crash()
        size = os.path.getsize(path)
        keep = data.draw(st.integers(min_value=0, max_value=size - 1), label="keep bytes")
        os.truncate(path, keep)
        survivors = sum(1 for position, length in entries if position + length <= keep)
        del self.model[self.writer.active.base_offset + survivors :]
        self.writer = self._open()

    @rule(garbage=st.binary(min_size=1, max_size=64))
    def garbage_and_reopen(self, garbage: bytes) -> None:
        """A crash left garbage after the last record: it is cut, every record survives."""
        path, _ = self._crash()
        with open(path, "ab") as file:
            file.write(garbage)
        self.writer = self._open()

    @invariant()
    def reads_back_the_model(self) -> None:
        """Readers see exactly the model from the oldest retained offset on, and the bounds agree."""
        expected = expected_messages(self.model[self.oldest :], first_offset=self.oldest)
        assert read_all(self.directory) == expected
        assert PartitionReader(self.directory, 0).bounds() == (self.oldest, len(self.model))
        assert self.writer.next_offset == len(self.model)
        assert self.writer.oldest_offset == self.oldest

    @precondition(lambda self: len(self.model) > self.oldest)
    @invariant()
    def reads_single_offsets(self) -> None:
        """read_one finds the newest and the oldest retained message."""
        reader = PartitionReader(self.directory, 0)
        for offset in (self.oldest, len(self.model) - 1):
            value, key, timestamp_ns, headers = self.model[offset]
            assert reader.read_one(offset) == Message(0, offset, timestamp_ns, key, value, headers)


PartitionMachine.TestCase.settings = settings(max_examples=60, stateful_step_count=30, deadline=None)
TestPartitionMachine = PartitionMachine.TestCase
