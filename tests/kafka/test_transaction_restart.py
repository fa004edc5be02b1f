"""Transactions across a restart of the gateway: what a ``read_committed`` consumer is given of
transactions ended before the restart is what it was given before it — an aborted transaction stays
hidden (Fetch's aborted transactions come from the partition's data, not from the gateway's memory),
a committed one stays whole — after SIGKILL and after a clean stop alike; and a transaction left open
by a SIGKILL is aborted by the next start, never half visible."""

from __future__ import annotations

import pathlib
import signal

from differential import Side
from test_transaction_torture import Gateway
from transaction_support import (
    COMMITTED,
    DEADLINE,
    UNCOMMITTED,
    create,
    end_offsets,
    produce_flushed,
    read_to_end,
    transactional_producer,
)


def test_transactions_read_alike_after_restarts(tmp_path: pathlib.Path) -> None:
    """An aborted, a committed and an open transaction; the gateway SIGKILLed, then stopped cleanly:
    ``read_committed`` is given the committed record only, each time, and the open transaction is
    aborted by the first restart (its records never given, the last stable offset at the end)."""
    gateway = Gateway(tmp_path / "root")
    gateway.root.mkdir()
    gateway.start()
    try:
        side = Side("gateway", gateway.bootstrap, "restart")
        create(side, "t")
        producer = transactional_producer(side, "restart-txn")
        producer.begin_transaction()
        produce_flushed(producer, "t", 0, [b"aborted"])
        producer.abort_transaction(DEADLINE)
        producer.begin_transaction()
        produce_flushed(producer, "t", 0, [b"committed"])
        producer.commit_transaction(DEADLINE)
        producer.begin_transaction()
        produce_flushed(producer, "t", 0, [b"open"])
        seen = [read_to_end(side, [("t", 0)], COMMITTED)]
        gateway.kill()  # SIGKILL, started again
        for stop in ("after SIGKILL", "after a clean stop"):
            if stop == "after a clean stop":
                assert gateway.process is not None
                gateway.process.send_signal(signal.SIGTERM)
                gateway.process.wait(DEADLINE)
                gateway.start()
            side = Side("gateway", gateway.bootstrap, f"restart-{len(seen)}")
            seen.append(read_to_end(side, [("t", 0)], COMMITTED))
            assert end_offsets(side, [("t", 0)]) == {COMMITTED: [6], UNCOMMITTED: [6]}, stop
            assert [value for *_, value in read_to_end(side, [("t", 0)], UNCOMMITTED)] == [
                b"aborted",
                b"committed",
                b"open",
            ]
    finally:
        gateway.stop()
    committed_only = [("t", 0, 2, b"k", b"committed")]
    assert seen == [committed_only] * 3, "read_committed before the restart, after SIGKILL, after a clean stop"
