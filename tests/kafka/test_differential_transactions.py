"""Transactions as librdkafka (confluent-kafka) sees them, on the gateway and on Apache Kafka
(differential.py): commit, abort, an open transaction holding back ``read_committed`` readers, a
zombie fenced by a new instance of its transactional id, consume-transform-produce with the group's
offsets in the transaction, a hung transaction aborted at its timeout, two transactional ids and a
plain producer interleaved on one partition, and one transaction over many partitions of two topics.

Each scenario returns what librdkafka observed: delivery offsets (a commit or abort marker takes an
offset, as in Kafka), what a ``read_committed`` and a ``read_uncommitted`` consumer are given up to
the end Fetch answers each, ListOffsets' last stable offset and high watermark, committed group
offsets and the errors the producer's calls raise. Kafka's observation is also checked against what
the scenario expects, so that both sides agreeing on a wrong answer cannot pass.
"""

from __future__ import annotations

import time
from typing import Any

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from differential import Differential, Side
from transaction_support import (
    COMMITTED,
    DEADLINE,
    UNCOMMITTED,
    create,
    end_offsets,
    failure,
    produce_flushed,
    read_to_end,
    stable_offset_reaches,
    transactional_producer,
)


def values(seen: list[Any]) -> list[tuple[int, bytes | None]]:
    """(offset, value) of each record seen."""
    return [(offset, value) for _topic, _partition, offset, _key, value in seen]


def test_commit_and_abort(differential: Differential) -> None:
    """A committed, an aborted and a committed transaction in turn: the records' offsets leave one
    for each marker; ``read_committed`` is given the committed records only, ``read_uncommitted``
    every record (never a marker); both ends are past the last marker."""

    def scenario(side: Side) -> dict[str, Any]:
        topic = side.name()
        create(side, topic)
        producer = transactional_producer(side, side.name("txn"))
        produced = []
        for values_, commit in (([b"a0", b"a1", b"a2"], True), ([b"b0", b"b1"], False), ([b"c0"], True)):
            producer.begin_transaction()
            produced.append(produce_flushed(producer, topic, 0, values_))
            if commit:
                producer.commit_transaction(DEADLINE)
            else:
                producer.abort_transaction(DEADLINE)
        return {
            "produced": produced,
            COMMITTED: values(read_to_end(side, [(topic, 0)], COMMITTED)),
            UNCOMMITTED: values(read_to_end(side, [(topic, 0)], UNCOMMITTED)),
            "ends": end_offsets(side, [(topic, 0)]),
        }

    seen = differential.compare(scenario)
    assert seen["produced"] == [[0, 1, 2], [4, 5], [7]]
    assert seen[COMMITTED] == [(0, b"a0"), (1, b"a1"), (2, b"a2"), (7, b"c0")]
    assert seen[UNCOMMITTED] == [(0, b"a0"), (1, b"a1"), (2, b"a2"), (4, b"b0"), (5, b"b1"), (7, b"c0")]
    assert seen["ends"] == {COMMITTED: [9], UNCOMMITTED: [9]}


def test_open_transaction_holds_back_read_committed(differential: Differential) -> None:
    """While a transaction is open, ``read_committed`` stops at its first record (the last stable
    offset), even before a later record that is not transactional; ``read_uncommitted`` reads on to
    the high watermark. Once it commits, both read everything."""

    def scenario(side: Side) -> dict[str, Any]:
        topic = side.name()
        create(side, topic)
        producer = transactional_producer(side, side.name("txn"))
        producer.begin_transaction()
        produce_flushed(producer, topic, 0, [b"x0"])
        producer.commit_transaction(DEADLINE)
        producer.begin_transaction()
        open_offsets = produce_flushed(producer, topic, 0, [b"y0", b"y1"])
        plain = Producer({"bootstrap.servers": side.bootstrap, "linger.ms": 0})
        plain_offsets = produce_flushed(plain, topic, 0, [b"z0"])
        while_open = {
            COMMITTED: values(read_to_end(side, [(topic, 0)], COMMITTED)),
            UNCOMMITTED: values(read_to_end(side, [(topic, 0)], UNCOMMITTED)),
            "ends": end_offsets(side, [(topic, 0)]),
        }
        producer.commit_transaction(DEADLINE)
        return {
            "produced": [open_offsets, plain_offsets],
            "while_open": while_open,
            "after_commit": {
                COMMITTED: values(read_to_end(side, [(topic, 0)], COMMITTED)),
                UNCOMMITTED: values(read_to_end(side, [(topic, 0)], UNCOMMITTED)),
                "ends": end_offsets(side, [(topic, 0)]),
            },
        }

    seen = differential.compare(scenario)
    everything = [(0, b"x0"), (2, b"y0"), (3, b"y1"), (4, b"z0")]
    assert seen["produced"] == [[2, 3], [4]]
    assert seen["while_open"] == {
        COMMITTED: [(0, b"x0")],
        UNCOMMITTED: everything,
        "ends": {COMMITTED: [2], UNCOMMITTED: [5]},
    }
    assert seen["after_commit"] == {
        COMMITTED: everything,
        UNCOMMITTED: everything,
        "ends": {COMMITTED: [6], UNCOMMITTED: [6]},
    }


def test_zombie_is_fenced(differential: Differential) -> None:
    """A second producer of the same transactional id fences the first: the first's open
    transaction is aborted, its commit fails with a fatal PRODUCER_FENCED, and only the second's
    committed record reaches ``read_committed``."""

    def scenario(side: Side) -> dict[str, Any]:
        topic = side.name()
        create(side, topic)
        transactional_id = side.name("txn")
        zombie = transactional_producer(side, transactional_id)
        zombie.begin_transaction()
        zombie_offsets = produce_flushed(zombie, topic, 0, [b"zombie"])
        fresh = transactional_producer(side, transactional_id)
        fresh.begin_transaction()
        fresh_offsets = produce_flushed(fresh, topic, 0, [b"fresh"])
        fresh.commit_transaction(DEADLINE)
        return {
            "produced": [zombie_offsets, fresh_offsets],
            "zombie_commit": failure(lambda: zombie.commit_transaction(DEADLINE)),
            COMMITTED: values(read_to_end(side, [(topic, 0)], COMMITTED)),
            UNCOMMITTED: values(read_to_end(side, [(topic, 0)], UNCOMMITTED)),
            "ends": end_offsets(side, [(topic, 0)]),
        }

    seen = differential.compare(scenario)
    assert seen["produced"] == [[0], [2]]
    assert seen["zombie_commit"] == {"error": "_FENCED", "fatal": True, "abortable": False}
    assert seen[COMMITTED] == [(2, b"fresh")]
    assert seen[UNCOMMITTED] == [(0, b"zombie"), (2, b"fresh")]


def test_consume_transform_produce(differential: Differential) -> None:
    """A group member reads an input topic, a transactional producer writes what it read, transformed,
    with the group's offsets in the same transaction (``send_offsets_to_transaction``): the offsets
    are committed only when the transaction commits, and an aborted round leaves them, and the
    output ``read_committed`` is given, as they were."""

    def scenario(side: Side) -> dict[str, Any]:
        source, sink, group = side.name("in"), side.name("out"), side.name("g")
        create(side, source)
        create(side, sink)
        plain = Producer({"bootstrap.servers": side.bootstrap, "linger.ms": 0})
        member = Consumer(
            {
                "bootstrap.servers": side.bootstrap,
                "group.id": group,
                "enable.auto.commit": False,
                "auto.offset.reset": "earliest",
                "isolation.level": COMMITTED,
            }
        )
        # Two onlookers of the group's offsets: librdkafka's OffsetFetch asks for stable offsets when
        # its consumer is read_committed (KIP-447), and Kafka answers UNSTABLE_OFFSET_COMMIT, retried
        # by the client, while the group has offsets pending in a transaction.
        onlooker = Consumer(
            {
                "bootstrap.servers": side.bootstrap,
                "group.id": group,
                "enable.auto.commit": False,
                "isolation.level": UNCOMMITTED,
            }
        )
        stable_onlooker = Consumer(
            {
                "bootstrap.servers": side.bootstrap,
                "group.id": group,
                "enable.auto.commit": False,
                "isolation.level": COMMITTED,
            }
        )
        producer = transactional_producer(side, side.name("txn"))
        partition = TopicPartition(source, 0)

        def committed(reader: Consumer) -> int:
            return int(reader.committed([partition], 30)[0].offset)

        def round_(inputs: list[bytes], commit: bool) -> dict[str, Any]:
            produce_flushed(plain, source, 0, inputs)
            got: list[bytes] = []
            while len(got) < len(inputs):
                message = member.poll(DEADLINE)
                assert message is not None, f"no record of the input within {DEADLINE} s"
                assert message.error() is None, message.error()
                got.append(message.value())
            producer.begin_transaction()
            produce_flushed(producer, sink, 0, [value.upper() for value in got])
            producer.send_offsets_to_transaction(member.position([partition]), member.consumer_group_metadata(), 30)
            before = committed(onlooker)
            stable_before = failure(lambda: stable_onlooker.committed([partition], 2))
            if commit:
                producer.commit_transaction(DEADLINE)
            else:
                producer.abort_transaction(DEADLINE)
            return {
                "read": got,
                "committed_before_end": before,
                "stable_before_end": stable_before,
                # Kafka answers EndTxn before its markers are written: the stable fetch waits for them.
                "committed_after_end": committed(stable_onlooker),
            }

        try:
            member.subscribe([source])
            first = round_([b"a", b"b", b"c"], commit=True)
            second = round_([b"d", b"e"], commit=False)
        finally:
            member.close()
            onlooker.close()
            stable_onlooker.close()
        return {
            "first": first,
            "second": second,
            COMMITTED: values(read_to_end(side, [(sink, 0)], COMMITTED)),
            UNCOMMITTED: values(read_to_end(side, [(sink, 0)], UNCOMMITTED)),
        }

    seen = differential.compare(scenario)
    no_offset = -1001  # librdkafka's OFFSET_INVALID: nothing committed
    unstable = {"error": "_TIMED_OUT", "fatal": False, "abortable": False}
    assert seen["first"] == {
        "read": [b"a", b"b", b"c"],
        "committed_before_end": no_offset,
        "stable_before_end": unstable,
        "committed_after_end": 3,
    }
    assert seen["second"] == {
        "read": [b"d", b"e"],
        "committed_before_end": 3,
        "stable_before_end": unstable,
        "committed_after_end": 3,
    }
    assert seen[COMMITTED] == [(0, b"A"), (1, b"B"), (2, b"C")]
    assert seen[UNCOMMITTED] == [(0, b"A"), (1, b"B"), (2, b"C"), (4, b"D"), (5, b"E")]


def test_hung_transaction_is_aborted_at_its_timeout(differential: Differential) -> None:
    """A producer that never ends its transaction: ``read_committed`` is held at its first record
    until ``transaction.timeout.ms`` passes, then the coordinator aborts it (an abort marker, the last
    stable offset at the end); the producer's late commit fails, and after an abort it writes again.

    The "while open" reading only proves the transaction open if it was answered before the
    coordinator could abort it: its clock starts after the producer is made, so a reading finished
    within the timeout of that moment is taken before the deadline. A reading that finished later
    (a loaded machine) may have raced the abort, whose marker the high watermark counts before the
    marker is durable; then the scenario starts again with a fresh topic and transactional id."""
    timeout_s = 3.0

    def open_transaction(side: Side, attempt: int) -> tuple[str, Producer, list[int], dict[str, list[int]]] | None:
        topic = side.name(f"t{attempt}")
        create(side, topic)
        started = time.monotonic()  # no later than the coordinator's clock for this transaction starts
        producer = transactional_producer(side, side.name(f"txn{attempt}"), **{"transaction.timeout.ms": 3000})
        producer.begin_transaction()
        hung = produce_flushed(producer, topic, 0, [b"h0", b"h1"])
        while_open = end_offsets(side, [(topic, 0)])
        if time.monotonic() - started < timeout_s:
            return topic, producer, hung, while_open
        return None

    def scenario(side: Side) -> dict[str, Any]:
        for attempt in range(5):
            opened = open_transaction(side, attempt)
            if opened is not None:
                break
        else:
            pytest.fail(f"no reading within {timeout_s} s of the transaction's start in 5 attempts")
        topic, producer, hung, while_open = opened
        stable_offset_reaches(side, topic, 0, 3)  # the abort marker at 2
        late = failure(lambda: producer.commit_transaction(DEADLINE))
        if late is not None and late["abortable"]:
            producer.abort_transaction(DEADLINE)
        else:  # fenced (the coordinator bumped the epoch): the application starts a new producer
            producer = transactional_producer(side, side.name(f"txn{attempt}"), **{"transaction.timeout.ms": 3000})
        producer.begin_transaction()
        after = produce_flushed(producer, topic, 0, [b"after"])
        producer.commit_transaction(DEADLINE)
        return {
            "produced": [hung, after],
            "ends_while_open": while_open,
            "late_commit": late,
            COMMITTED: values(read_to_end(side, [(topic, 0)], COMMITTED)),
            UNCOMMITTED: values(read_to_end(side, [(topic, 0)], UNCOMMITTED)),
        }

    seen = differential.compare(scenario)
    assert seen["produced"] == [[0, 1], [3]]
    assert seen["ends_while_open"] == {COMMITTED: [0], UNCOMMITTED: [2]}
    assert seen["late_commit"] == {"error": "_FENCED", "fatal": True, "abortable": False}
    assert seen[COMMITTED] == [(3, b"after")]
    assert seen[UNCOMMITTED] == [(0, b"h0"), (1, b"h1"), (3, b"after")]


def test_interleaved_transactions_and_plain_records(differential: Differential) -> None:
    """Two transactional ids write one partition at once, with records of a plain producer between
    theirs: the one that aborts first leaves the other's open transaction holding ``read_committed``
    back at its first record; once that one commits, ``read_committed`` is given the committed and
    the plain records in offset order, and never the aborted ones.

    Nothing is produced right after an EndTxn: Kafka writes the markers after answering it, so a
    record produced then may take its offset before or after the marker."""

    def scenario(side: Side) -> dict[str, Any]:
        topic = side.name()
        create(side, topic)
        first = transactional_producer(side, side.name("first"))
        second = transactional_producer(side, side.name("second"))
        plain = Producer({"bootstrap.servers": side.bootstrap, "linger.ms": 0})
        produced = []
        first.begin_transaction()
        produced.append(produce_flushed(first, topic, 0, [b"a0", b"a1"]))
        produced.append(produce_flushed(plain, topic, 0, [b"p0"]))
        second.begin_transaction()
        produced.append(produce_flushed(second, topic, 0, [b"b0", b"b1"]))
        produced.append(produce_flushed(first, topic, 0, [b"a2"]))
        produced.append(produce_flushed(plain, topic, 0, [b"p1"]))
        second.abort_transaction(DEADLINE)
        while_first_open = {
            COMMITTED: values(read_to_end(side, [(topic, 0)], COMMITTED)),
            "stable end": end_offsets(side, [(topic, 0)])[COMMITTED],
        }
        first.commit_transaction(DEADLINE)
        return {
            "produced": produced,
            "while_first_open": while_first_open,
            COMMITTED: values(read_to_end(side, [(topic, 0)], COMMITTED)),
            UNCOMMITTED: values(read_to_end(side, [(topic, 0)], UNCOMMITTED)),
            "ends": end_offsets(side, [(topic, 0)]),
        }

    seen = differential.compare(scenario)
    assert seen["produced"] == [[0, 1], [2], [3, 4], [5], [6]]
    assert seen["while_first_open"] == {COMMITTED: [], "stable end": [0]}
    committed = [(0, b"a0"), (1, b"a1"), (2, b"p0"), (5, b"a2"), (6, b"p1")]
    assert seen[COMMITTED] == committed
    assert seen[UNCOMMITTED] == sorted([*committed, (3, b"b0"), (4, b"b1")])
    assert seen["ends"] == {COMMITTED: [9], UNCOMMITTED: [9]}


def test_many_partitions_in_one_transaction(differential: Differential) -> None:
    """One transaction writes every partition of two topics (six and two) and commits, the next
    writes them all and aborts, a third writes one partition and commits: on every partition
    ``read_committed`` is given the committed records, and ListOffsets' ends agree."""

    def scenario(side: Side) -> dict[str, Any]:
        wide, narrow = side.name("wide"), side.name("narrow")
        create(side, wide, 6)
        create(side, narrow, 2)
        partitions = [(wide, p) for p in range(6)] + [(narrow, p) for p in range(2)]
        producer = transactional_producer(side, side.name("txn"))
        for round_, commit in ((b"one", True), (b"two", False)):
            producer.begin_transaction()
            for topic, partition in partitions:
                produce_flushed(producer, topic, partition, [b"%s-%d" % (round_, partition)])
            if commit:
                producer.commit_transaction(DEADLINE)
            else:
                producer.abort_transaction(DEADLINE)
        producer.begin_transaction()
        produce_flushed(producer, narrow, 1, [b"three"])
        producer.commit_transaction(DEADLINE)

        def by_partition(seen: list[Any]) -> list[tuple[str, int, int, bytes | None]]:
            short = {wide: "wide", narrow: "narrow"}
            return sorted((short[topic], partition, offset, value) for topic, partition, offset, _key, value in seen)

        return {
            COMMITTED: by_partition(read_to_end(side, partitions, COMMITTED)),
            UNCOMMITTED: len(read_to_end(side, partitions, UNCOMMITTED)),
            "ends": end_offsets(side, partitions),
        }

    seen = differential.compare(scenario)
    assert len(seen[COMMITTED]) == 9
    assert seen[UNCOMMITTED] == 17
    assert ("narrow", 1, 4, b"three") in seen[COMMITTED]
    assert seen["ends"] == {COMMITTED: [4] * 7 + [6], UNCOMMITTED: [4] * 7 + [6]}


def test_parked_read_committed_fetch_waits_for_the_outcome(differential: Differential) -> None:
    """A ``read_committed`` consumer already waiting at the end of the partition (its Fetch parked in
    the long poll) when a transaction writes: it is given none of the transaction's records while it
    is open, none once it aborts, and the next transaction's once that one commits."""

    def scenario(side: Side) -> dict[str, Any]:
        topic = side.name()
        create(side, topic)
        consumer = Consumer(
            {
                "bootstrap.servers": side.bootstrap,
                "group.id": side.name("reader"),
                "enable.auto.commit": False,
                "enable.partition.eof": True,
                "isolation.level": COMMITTED,
                "fetch.wait.max.ms": 500,
            }
        )
        try:
            consumer.assign([TopicPartition(topic, 0, 0)])

            def poll_until_end() -> list[tuple[int, bytes | None]]:
                got: list[tuple[int, bytes | None]] = []
                while True:
                    message = consumer.poll(DEADLINE)
                    assert message is not None, f"no end of the partition within {DEADLINE} s"
                    if message.error() is not None:
                        return got
                    got.append((message.offset(), message.value()))

            def poll_for(seconds: float) -> list[tuple[int, bytes | None]]:
                # The absence of records is what is observed: a window as long as several of the
                # consumer's long polls, each answered as soon as the broker has anything for it.
                got: list[tuple[int, bytes | None]] = []
                ends = time.monotonic() + seconds
                while (left := ends - time.monotonic()) > 0:
                    message = consumer.poll(left)
                    if message is not None and message.error() is None:
                        got.append((message.offset(), message.value()))
                return got

            at_start = poll_until_end()  # an empty partition: its end, the Fetch then parks
            producer = transactional_producer(side, side.name("txn"))
            producer.begin_transaction()
            produce_flushed(producer, topic, 0, [b"o0", b"o1", b"o2"])
            while_open = poll_for(2.0)
            producer.abort_transaction(DEADLINE)
            after_abort = poll_for(2.0)
            producer.begin_transaction()
            produce_flushed(producer, topic, 0, [b"c0"])
            producer.commit_transaction(DEADLINE)
            after_commit = poll_until_end()
        finally:
            consumer.close()
        return {
            "at_start": at_start,
            "while_open": while_open,
            "after_abort": after_abort,
            "after_commit": after_commit,
        }

    seen = differential.compare(scenario)
    assert seen == {"at_start": [], "while_open": [], "after_abort": [], "after_commit": [(4, b"c0")]}
