"""adiskq: an embedded, partitioned, append-only message log for async Python.

A stream lives in one folder on local disk; one producer writes it (or, with ``shared=True``,
several in several processes), any number of consumers in any process read it. See README.md for
the tour and the on-disk format, and docs/ARCHITECTURE.md for how it is built.
"""

from typing import TYPE_CHECKING

from ._errors import ClosedError as ClosedError
from ._errors import CorruptRecordError as CorruptRecordError
from ._errors import CorruptStreamError as CorruptStreamError
from ._errors import DeserializationError as DeserializationError
from ._errors import DiskUsageRefusedError as DiskUsageRefusedError
from ._errors import Error as Error
from ._errors import GroupInUseError as GroupInUseError
from ._errors import InvalidArgumentError as InvalidArgumentError
from ._errors import InvalidNameError as InvalidNameError
from ._errors import LockTimeoutError as LockTimeoutError
from ._errors import MessageKeptError as MessageKeptError
from ._errors import MessageTooLargeError as MessageTooLargeError
from ._errors import NotAStreamError as NotAStreamError
from ._errors import OffsetOutOfRangeError as OffsetOutOfRangeError
from ._errors import PartialWriteError as PartialWriteError
from ._errors import SettingsMismatchError as SettingsMismatchError
from ._errors import StreamLockedError as StreamLockedError
from ._errors import StreamNotFoundError as StreamNotFoundError
from ._errors import UnsupportedFeatureError as UnsupportedFeatureError
from ._sansio import core as _core
from ._sansio.values import GroupMember as GroupMember
from ._sansio.values import Headers as Headers
from ._sansio.values import Message as Message
from ._sansio.values import PartitionStats as PartitionStats
from ._sansio.values import Receipt as Receipt
from ._sansio.values import Record as Record
from ._sansio.values import RecoveryReport as RecoveryReport
from ._sansio.values import Retention as Retention
from ._sansio.values import SegmentRepair as SegmentRepair
from ._sansio.values import StreamStats as StreamStats
from ._sansio.values import VacuumReport as VacuumReport
from ._sansio.values import WriterInfo as WriterInfo

if TYPE_CHECKING:
    from ._async.consumer import Consumer as Consumer
    from ._async.group import ConsumerGroup as ConsumerGroup
    from ._async.producer import Producer as Producer
    from ._group_functions import delete_group as delete_group
    from ._group_functions import lag as lag
    from ._group_functions import reset_offsets as reset_offsets
    from ._sansio.capabilities import capabilities as capabilities
    from ._storage.api import find as find
    from ._storage.api import offset_for_time as offset_for_time
    from ._storage.api import read as read
    from ._storage.api import stats as stats

__version__ = "0.2.0.dev0"


def _report_as_public(value: object, name: str) -> None:
    """Name ``value`` (a class or function of a private module) ``adiskq.NAME`` in its metadata, as
    trio does for its public names: reprs, ``help()``, tracebacks and pickles then say
    ``adiskq.Producer``, where the object is to be found, not the private module it is defined in.
    A class's own methods follow it."""
    module = getattr(value, "__module__", None)
    if not isinstance(module, str) or not module.startswith(__name__ + "._"):
        return  # defined elsewhere (a typing alias, a compiled type): left as it is
    try:
        value.__module__ = __name__
    except (AttributeError, TypeError):  # pragma: no cover - a type that fixes its module
        return
    if isinstance(value, type):
        for member in vars(value).values():
            function = getattr(member, "__func__", member)  # a classmethod's or staticmethod's function
            if getattr(function, "__module__", None) == module and getattr(function, "__qualname__", "").startswith(
                value.__qualname__ + "."
            ):
                function.__module__ = __name__
        if value.__qualname__ != name:  # pragma: no cover - every public name is its class's own
            raise AssertionError(f"adiskq.{name} is {value.__qualname__}")


# True when the compiled core (adiskq/_csrc) does the per-record work; False with
# ADISKQ_NO_EXTENSIONS=1 or in a source checkout nobody built, where the pure-Python core runs.
compiled: bool = _core.COMPILED

# The classes and functions load on first use, each with only the modules it needs: scripts, the CLI
# and Spark workers that only use the synchronous API never import anyio or asyncio (most of the
# start-up: see benchmarks/RESULTS.md, section "Figures the code relies on", F12), and a process
# that only produces never loads the read, stats and group paths (about 1 MiB of code and the
# compression modules shutil brings).
_LAZY = {
    "Consumer": "._async.consumer",
    "ConsumerGroup": "._async.group",
    "Producer": "._async.producer",
    "capabilities": "._sansio.capabilities",
    "delete_group": "._group_functions",
    "find": "._storage.api",
    "lag": "._group_functions",
    "offset_for_time": "._storage.api",
    "read": "._storage.api",
    "reset_offsets": "._group_functions",
    "stats": "._storage.api",
}


def __getattr__(name: str) -> object:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'adiskq' has no attribute {name!r}")
    import importlib

    value = getattr(importlib.import_module(module, __name__), name)
    _report_as_public(value, name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_LAZY))


__all__ = [
    "ClosedError",
    "Consumer",
    "ConsumerGroup",
    "CorruptRecordError",
    "CorruptStreamError",
    "DeserializationError",
    "DiskUsageRefusedError",
    "Error",
    "GroupInUseError",
    "GroupMember",
    "Headers",
    "InvalidArgumentError",
    "InvalidNameError",
    "LockTimeoutError",
    "Message",
    "MessageKeptError",
    "MessageTooLargeError",
    "NotAStreamError",
    "OffsetOutOfRangeError",
    "PartialWriteError",
    "PartitionStats",
    "Producer",
    "Receipt",
    "Record",
    "RecoveryReport",
    "Retention",
    "SegmentRepair",
    "SettingsMismatchError",
    "StreamLockedError",
    "StreamNotFoundError",
    "StreamStats",
    "UnsupportedFeatureError",
    "VacuumReport",
    "WriterInfo",
    "capabilities",
    "delete_group",
    "find",
    "lag",
    "offset_for_time",
    "read",
    "reset_offsets",
    "stats",
]

for _name in __all__:
    if _name in globals():  # the eager ones now; the lazy ones as they load (__getattr__)
        _report_as_public(globals()[_name], _name)
del _name
