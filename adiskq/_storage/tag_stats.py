"""``adiskq stats --tags``: how many messages of a segment carry each tag, confirmed from the records.

The ``.tagindex`` column counts messages per tag *hash*; a hash only names candidates, since two
tags may share one (a CRC-32 collision). So each hash is named by the tag of its first message, the
messages with those names are counted by a filtered read of the segment (which confirms each
candidate's tag from its record, as a tag-filtered consumer and a group's lag do), and where a hash
has more messages than its name confirmed, the others are read one by one for their own tags. A
message whose record cannot be read (damage) is not counted, and is reported as such.
"""

from __future__ import annotations

import collections
from collections.abc import Sequence

from .._errors import CorruptRecordError
from .._sansio.tags import NO_TAG, TagFilter
from .segment_reader import SegmentReader

__all__ = ["segment_tag_counts"]

_SCAN_OFFSETS = 65_536  # offsets a filtered read looks at
_READ_BYTES = 16 * 2**20  # records a filtered read takes at most


def segment_tag_counts(segment: SegmentReader, base: int, hashes: Sequence[int]) -> tuple[dict[str | None, int], int]:
    """Messages per tag (None: untagged) among the segment's first ``len(hashes)`` messages, whose
    ``.tagindex`` hashes are ``hashes``, and how many could not be counted (damaged records)."""
    by_hash = collections.Counter(hashes)
    counts: dict[str | None, int] = {}
    uncounted = 0
    untagged = by_hash.pop(NO_TAG, 0)
    if untagged:
        counts[None] = untagged
    names: dict[int, str] = {}
    for hash_value in by_hash:
        tag = _tag_at(segment, base + hashes.index(hash_value))
        if tag is not None:
            names[hash_value] = tag
    confirmed = _confirmed_counts(segment, base, len(hashes), names) if names else None
    for hash_value, count in by_hash.items():
        name = names.get(hash_value)
        if confirmed is not None and name is not None and confirmed[name] == count:
            counts[name] = counts.get(name, 0) + count
            continue
        # Not every message of the hash confirmed under its name: another tag shares the hash, or a
        # record is damaged. Each of its messages is read alone, for its own tag.
        for entry, entry_hash in enumerate(hashes):
            if entry_hash != hash_value:
                continue
            tag = _tag_at(segment, base + entry)
            if tag is None:
                uncounted += 1
            else:
                counts[tag] = counts.get(tag, 0) + 1
    return counts, uncounted


def _tag_at(segment: SegmentReader, offset: int) -> str | None:
    """The tag of the message at ``offset`` (None: untagged, damaged or gone)."""
    try:
        messages = segment.read_messages(offset, 1)
    except CorruptRecordError:
        return None
    return messages[0].tag if messages else None


def _confirmed_counts(
    segment: SegmentReader, base: int, count: int, names: dict[int, str]
) -> collections.Counter[str] | None:
    """Messages per named tag among the segment's first ``count``, each tag confirmed from its record;
    None when a damaged record stops the read (the caller then reads each candidate alone)."""
    tag_filter = TagFilter(set(names.values()))
    found: collections.Counter[str] = collections.Counter()
    offset = base
    try:
        while offset < base + count:
            scan = min(_SCAN_OFFSETS, base + count - offset)
            messages, passed = segment.read_tagged(offset, scan, scan, tag_filter, _READ_BYTES)
            if not passed:
                break
            found.update(message.tag for message in messages if message.tag is not None)
            offset += passed
    except CorruptRecordError:
        return None
    return found
