"""Every argument error of the async layer is an InvalidArgumentError (a ValueError) naming the argument,
raised when the object is made: on a stream's path and on a ``kafka://`` URL alike (no broker is
asked: the URL here names none that listens, so a check that went to the network would fail)."""

from __future__ import annotations

from collections.abc import Callable

import pytest

import adiskq

BAD: list[tuple[str, Callable[[str], object]]] = [
    ("flush=", lambda p: adiskq.Producer(p, flush="never")),  # type: ignore[arg-type]
    ("flush_interval=", lambda p: adiskq.Producer(p, flush_interval=0)),
    ("vacuum_interval=", lambda p: adiskq.Producer(p, vacuum_interval=-1)),
    ("lock_timeout=", lambda p: adiskq.Producer(p, lock_timeout=-1)),
    ("partition=", lambda p: adiskq.Consumer(p, partition=-1)),
    ("start=", lambda p: adiskq.Consumer(p, start="yesterday")),  # type: ignore[arg-type]
    ("end=", lambda p: adiskq.Consumer(p, end="never")),  # type: ignore[arg-type]
    ("on_data_loss=", lambda p: adiskq.Consumer(p, on_data_loss="ignore")),  # type: ignore[arg-type]
    ("poll_interval=", lambda p: adiskq.Consumer(p, poll_interval=0)),
    ("end=", lambda p: adiskq.ConsumerGroup(p, name="g", end=5)),  # type: ignore[arg-type]
    ("commit_interval=", lambda p: adiskq.ConsumerGroup(p, name="g", commit_interval=0)),
    ("rebalance_interval=", lambda p: adiskq.ConsumerGroup(p, name="g", rebalance_interval=True)),
    ("partitions=", lambda p: adiskq.Producer(p, partitions=0)),
    ("shared=", lambda p: adiskq.Producer(p, shared="yes")),  # type: ignore[arg-type]
    ("compression=", lambda p: adiskq.Producer(p, compression="gzip")),  # type: ignore[arg-type]
    ("start=", lambda p: adiskq.ConsumerGroup(p, name="g", start=-1)),
]

# Where nothing listens (the discard port): a Kafka constructor that asked the cluster would fail here.
NO_BROKER_URL = "kafka://127.0.0.1:9/orders"


@pytest.mark.parametrize("backend", ["local", "kafka"])
@pytest.mark.parametrize(("named", "make"), BAD, ids=[f"{i}-{name}" for i, (name, _) in enumerate(BAD)])
def test_a_bad_argument_raises_invalid_argument_error_naming_it(
    stream_path: str, backend: str, named: str, make: Callable[[str], object]
) -> None:
    """Constructors check their arguments before any I/O, with an error that names the argument
    (on Kafka, the local stream's own options are refused by name: README's capability table)."""
    with pytest.raises(adiskq.InvalidArgumentError, match=named):
        make(stream_path if backend == "local" else NO_BROKER_URL)


WRONG_KIND: list[tuple[str, Callable[[str], object]]] = [
    ("retention=", lambda p: adiskq.Producer(p, retention=5)),  # type: ignore[arg-type]
    ("value_serializer", lambda p: adiskq.Producer(p, value_serializer=b"json")),  # type: ignore[arg-type]
    ("key_serializer", lambda p: adiskq.Producer(p, key_serializer="utf-8")),  # type: ignore[arg-type]
]


@pytest.mark.parametrize("backend", ["local", "kafka"])
@pytest.mark.parametrize(("named", "make"), WRONG_KIND, ids=[name for name, _ in WRONG_KIND])
def test_an_argument_of_the_wrong_kind_raises_type_error_naming_it(
    stream_path: str, backend: str, named: str, make: Callable[[str], object]
) -> None:
    """A value of the wrong kind (not a Retention, not a function) is a TypeError naming the argument."""
    with pytest.raises(TypeError, match=named):
        make(stream_path if backend == "local" else NO_BROKER_URL)
