"""The public names say where a user finds them: ``adiskq.Producer``, not the private module behind it."""

from __future__ import annotations

import inspect
import pickle
import subprocess
import sys

import pytest

import adiskq


@pytest.mark.parametrize("name", adiskq.__all__)
def test_every_public_class_and_function_reports_adiskq_as_its_module(name: str) -> None:
    value = getattr(adiskq, name)
    assert value.__module__ == "adiskq"
    assert value.__qualname__ == name
    if inspect.isclass(value):  # and so do its own methods (help(), tracebacks)
        private = [
            member.__qualname__
            for member in vars(value).values()
            if inspect.isfunction(member) and member.__module__.startswith("adiskq._")
        ]
        assert private == []


def test_reprs_and_tracebacks_name_the_public_class() -> None:
    assert repr(adiskq.Producer) == "<class 'adiskq.Producer'>"
    assert repr(adiskq.PartialWriteError) == "<class 'adiskq.PartialWriteError'>"
    done = subprocess.run(
        [sys.executable, "-c", "import adiskq; raise adiskq.ClosedError('x')"], capture_output=True, text=True
    )
    assert done.stderr.strip().splitlines()[-1] == "adiskq.ClosedError: x"


def test_values_and_errors_still_pickle_by_their_public_name() -> None:
    """Pickles name ``adiskq.X``, which a process that never imported the private module loads."""
    record = adiskq.Record(b"v", key="k", headers={"h": b"1"}, tag="t")
    assert b"_sansio" not in pickle.dumps(record)
    assert pickle.loads(pickle.dumps(record)) == record
    assert pickle.loads(pickle.dumps(adiskq.Retention(max_bytes=10))) == adiskq.Retention(max_bytes=10)
    error = pickle.loads(pickle.dumps(adiskq.ClosedError("closed")))
    assert type(error) is adiskq.ClosedError
    assert str(error) == "closed"


def test_a_lazily_loaded_class_is_public_once_loaded_in_a_fresh_process() -> None:
    code = "import adiskq; print(adiskq.Producer.__module__, adiskq.Producer.push.__module__, repr(adiskq.Consumer))"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.split() == ["adiskq", "adiskq", "<class", "'adiskq.Consumer'>"]
