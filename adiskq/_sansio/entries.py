"""The side files' entries: a segment's ``.index`` and ``.timeindex`` entries, the ``.tagindex`` and
``.keyindex`` widths, and how many entries an active segment's single pushes buffer.

``.index`` holds 24 bytes a message (offset | position in .data | size, u64 LE each) and is the
commit point: a message exists for readers once its entry does. ``.timeindex`` holds 16 bytes a
message (offset | timestamp_ns, LE), ``.tagindex`` 4 (the hash of its tag, ``tags.py``) and
``.keyindex`` 4 (the hash of its key, ``keyindex.py``). All are derived from ``.data``.
"""

from __future__ import annotations

import struct
from typing import Final

from . import keyindex, tags

__all__ = [
    "BUFFERED_ENTRIES",
    "INDEX_ENTRY",
    "INDEX_ENTRY_BYTES",
    "KEY_ENTRY_BYTES",
    "TAG_ENTRY_BYTES",
    "TIMEINDEX_ENTRY",
    "TIMEINDEX_ENTRY_BYTES",
]

INDEX_ENTRY: Final = struct.Struct("<QQQ")  # offset, position, size
TIMEINDEX_ENTRY: Final = struct.Struct("<Qq")  # offset, timestamp_ns
INDEX_ENTRY_BYTES: Final = INDEX_ENTRY.size
TIMEINDEX_ENTRY_BYTES: Final = TIMEINDEX_ENTRY.size
TAG_ENTRY_BYTES: Final = tags.ENTRY_BYTES  # u32 LE: the tag hash
KEY_ENTRY_BYTES: Final = keyindex.ENTRY_BYTES  # u32 LE: the key hash
# How many time, tag and key index entries an active segment's single pushes buffer before writing
# them (a global, not an attribute: it is read on the hot path).
BUFFERED_ENTRIES: Final = keyindex.TAIL_BUFFER_ENTRIES
