"""Every argument error of the async layer is an InvalidArgumentError (a ValueError) naming the argument."""

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
    ("end=", lambda p: adiskq.ConsumerGroup(p, end=5)),  # type: ignore[arg-type]
    ("commit_interval=", lambda p: adiskq.ConsumerGroup(p, name="g", commit_interval=0)),
    ("rebalance_interval=", lambda p: adiskq.ConsumerGroup(p, name="g", rebalance_interval=True)),
]


@pytest.mark.parametrize(("named", "make"), BAD, ids=[f"{i}-{name}" for i, (name, _) in enumerate(BAD)])
def test_a_bad_argument_raises_invalid_argument_error_naming_it(
    stream_path: str, named: str, make: Callable[[str], object]
) -> None:
    """Constructors check their arguments before any I/O, with an error that names the argument."""
    with pytest.raises(adiskq.InvalidArgumentError, match=named):
        make(stream_path)
