"""The compiled core's module (``adiskq._compiled``), or None when the pure-Python core runs.

None with ``ADISKQ_NO_EXTENSIONS=1`` in the environment, or in a source checkout nobody built
(``adiskq --version`` says which). ``core.py`` configures the module and wraps its functions; the
pure-Python codec takes only its CRC-32C from here (the CPU's instruction, held equal to the crc32c
package's by the tests), so a process running the compiled core never loads that package.
"""

from __future__ import annotations

import os
from types import ModuleType
from typing import Final

__all__ = ["DISABLED", "NATIVE"]

DISABLED: Final = os.environ.get("ADISKQ_NO_EXTENSIONS", "") not in ("", "0")
# Functions the sources of this version have and an older build lacks: a build of older sources
# (one left in a checkout, say) is not used, since it would read and write the records of its time.
_NEWEST: Final = (
    "tag_column",
    "matching_entries",
    "matching_records",
    "decode_at",
    "sorted_key_values",
    "install_record_call",
    "append_record",
    "kafka_decode_batches",
    "kafka_encode_messages",
    "zstd_prepare",
    "append_one",
    "kafka_stored_records",
    "kafka_batch_from_stored",
    "kafka_fetch_answer",
    "kafka_fetch_request",
    "kafka_produce_request",
    "place_entries",
    "pack_records",
    "receipt",
)


def _load() -> ModuleType | None:
    if DISABLED:
        return None
    try:
        from .. import _compiled
    except ImportError:
        return None
    if not all(hasattr(_compiled, name) for name in _NEWEST):
        return None  # out of date: rebuild it (pip install -e ., or setup.py build_ext --inplace)
    return _compiled


NATIVE: Final = _load()
