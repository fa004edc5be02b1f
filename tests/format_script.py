"""A fixed script of writes whose stream folders must stay byte for byte the same: the format test's.

Every way a record reaches ``.data`` is in it: single pushes (the inline branch, and with
``flush="sync"`` the batched one), ``push_many`` (one partition packed in one buffer, several
partitions' shares, a batch large enough to be split into steps), keys, tags, headers, explicit and
default timestamps, segments that roll, a compressed stream, a shared producer, and Kafka Produce
batches through the gateway's write entry (awaited and written at once, plain and off the compiled
path). ``tests/storage/test_format_manifest.py`` runs it and compares the SHA-256 of every file it
wrote with ``format_manifest.sha256`` beside that test (``sha256sum`` format: ``cd`` into the
folder ``write`` made and ``sha256sum -c`` the manifest checks it by hand).

What is left out, and why: records without a key (their key is random by design: each core draws it
its own way), concurrent pushes (Trio runs ready tasks in a random order), a dictionary trained by
the producer (zstd's trainer may differ between versions; the stream gets a fixed one instead), and
the files that name a process (``locks/``, the shared writers' registry); ``recovery.json`` is
compared with the modification times it notes set to 0. The clock is pinned:
``time.time_ns`` answers 1,700,000,000,000,000,000 plus a microsecond a call while the script runs.

To regenerate the manifest after a deliberate format change (the diff then shows which files moved):

    python tests/format_script.py --update      # refuses to overwrite unless --update is given
    ADISKQ_NO_EXTENSIONS=1 python tests/format_script.py   # must then report no difference
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import itertools
import json
import os
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path
from typing import Final

import anyio

import adiskq
from adiskq.kafka._records import decode_produce, records_from_batches, write_records, write_records_now
from adiskq.kafka.wire.batch import KafkaRecord, encode_batch

MANIFEST: Final = Path(__file__).resolve().parent / "storage" / "format_manifest.sha256"
CLOCK_START_NS: Final = 1_700_000_000_000_000_000
BASE_MS: Final = 1_700_000_000_000
# Files that name the process or the moment that wrote them, not the data: left out of the manifest.
PROCESS_FILES: Final = ("locks", "writers")
SMALL_SEGMENTS: Final = 4096  # bytes: the scripts' segments roll every few dozen records


@contextlib.contextmanager
def pinned_clock() -> Iterator[None]:
    """``time.time_ns`` (and the producer's own reference to it) answering a fixed sequence."""
    from adiskq._async import producer as producer_module

    ticks = itertools.count(CLOCK_START_NS, 1_000)
    real = time.time_ns

    def fake() -> int:
        return next(ticks)

    time.time_ns = fake
    saved = producer_module._time_ns
    producer_module._time_ns = fake  # type: ignore[misc]  # bound at import, so pinned too
    try:
        yield
    finally:
        time.time_ns = real
        producer_module._time_ns = saved  # type: ignore[misc]


def _at(n: int) -> int:
    """An explicit timestamp: the script's n-th millisecond, in nanoseconds."""
    return CLOCK_START_NS + n * 1_000_000


def _value(n: int, size: int = 40) -> bytes:
    return (b"value-%06d-" % n).ljust(size, b"abcdefgh"[n % 8 : n % 8 + 1])


async def _singles(path: str) -> None:
    """Single pushes on the inline branch: keyed, tagged, with headers, given and default timestamps,
    over segments that roll."""
    async with adiskq.Producer(path, partitions=3, segment_size_bytes=SMALL_SEGMENTS) as producer:
        for n in range(240):
            await producer.push(
                _value(n, 30 + n % 50),
                key=f"customer-{n % 7}" if n % 2 else b"raw-key-%d" % (n % 5),
                tag=None if n % 3 else f"kind-{n % 4}",
                headers={"trace": b"t-%d" % n, "empty": b""} if n % 5 == 0 else None,
                timestamp=None if n % 4 == 0 else _at(n),
            )


async def _batched(path: str) -> None:
    """``flush="sync"``: every push goes through a batch (with its fsync), one at a time."""
    async with adiskq.Producer(path, partitions=2, flush="sync", segment_size_bytes=SMALL_SEGMENTS) as producer:
        for n in range(60):
            await producer.push(_value(n), key=f"k{n % 3}", tag="sync" if n % 2 else None, timestamp=_at(n))
        await producer.push_many([adiskq.Record(_value(n), key=f"k{n}", timestamp=_at(n)) for n in range(30)])


async def _many(path: str) -> None:
    """``push_many``: one partition's packed batches, several partitions' shares, a large split batch."""
    async with adiskq.Producer(os.path.join(path, "one")) as producer:
        for round_ in range(5):
            await producer.push_many(
                [
                    adiskq.Record(_value(n), key=f"order-{n}", timestamp=_at(n))
                    for n in range(round_ * 50, round_ * 50 + 50)
                ]
            )
        await producer.push_many([adiskq.Record(b"plain", key="x")])  # the clock's timestamp
        await producer.push_many(
            [adiskq.Record(_value(n), key="k", tag=f"t{n % 3}", headers={"h": b"%d" % n}) for n in range(40)]
        )
    async with adiskq.Producer(
        os.path.join(path, "spread"), partitions=4, segment_size_bytes=SMALL_SEGMENTS
    ) as producer:
        await producer.push_many(
            [
                adiskq.Record(_value(n), key=f"user-{n % 11}", tag="spread" if n % 4 == 0 else None, timestamp=_at(n))
                for n in range(120)
            ]
        )
        await producer.push_many(  # over 256 records and several partitions: written a share per step
            [adiskq.Record(_value(n, 24), key=f"bulk-{n % 13}") for n in range(600)]
        )


async def _kafka_headers(path: str) -> None:
    """Format 5's headers: null values and repeated names, from push and push_many, beside plain ones."""
    async with adiskq.Producer(path, partitions=2) as producer:
        for n in range(20):
            await producer.push(
                _value(n),
                key=f"h-{n % 3}",
                headers=adiskq.Headers([("trace", b"%d" % n), ("gone", None), ("trace", b"again")])
                if n % 2
                else {"plain": b"%d" % n},
                timestamp=_at(n),
            )
        await producer.push_many(
            [
                adiskq.Record(_value(n), key="many", headers=adiskq.Headers([("n", None)] * (n % 3)), tag="t")
                for n in range(30)
            ]
        )


async def _compressed(path: str, dictionary: bytes) -> None:
    """A compressed stream (format 5 with compression), with a fixed dictionary: push and push_many."""
    async with adiskq.Producer(path, partitions=2, compression="zstd", zstd_dictionary=dictionary) as producer:
        for n in range(50):
            await producer.push(_value(n, 120), key=f"c{n % 4}", tag="z" if n % 5 == 0 else None, timestamp=_at(n))
        await producer.push_many([adiskq.Record(_value(n, 200), key=f"c{n}", timestamp=_at(n)) for n in range(40)])


async def _shared(path: str) -> None:
    """A shared producer (partition locks, the turn): single pushes and a batch."""
    async with adiskq.Producer(path, partitions=2, shared=True, segment_size_bytes=SMALL_SEGMENTS) as producer:
        for n in range(80):
            await producer.push(_value(n), key=f"s{n % 5}", tag="shared" if n % 6 == 0 else None, timestamp=_at(n))
        await producer.push_many([adiskq.Record(_value(n), key=f"s{n}", timestamp=_at(n)) for n in range(30)])


def _kafka_batch(first: int, count: int, *, headers: bool = False, compression: int = 0) -> bytes:
    records = [
        KafkaRecord(
            i,
            BASE_MS + first + i,
            None if (first + i) % 9 == 0 else b"kafka-key-%d" % ((first + i) % 6),
            _value(first + i, 60),
            [("source", b"kafka"), ("n", b"%d" % i)] if headers else [],
        )
        for i in range(count)
    ]
    return encode_batch(base_offset=0, records=records, base_timestamp_ms=BASE_MS + first, compression=compression)


async def _kafka(path: str, compressed_path: str, dictionary: bytes) -> None:
    """Produce batches as the gateway writes them: awaited and at once, straight to stored records and
    off that path (headers, a gzip batch, several batches for one partition), and to a compressed stream."""
    async with adiskq.Producer(path, partitions=2, segment_size_bytes=SMALL_SEGMENTS) as producer:
        for n in range(6):
            batch = _kafka_batch(n * 40, 40, headers=n % 3 == 2, compression=1 if n == 4 else 0)
            records = records_from_batches(decode_produce(batch))
            # as the gateway does: at once when the partition takes it now (not when a roll is due)
            if n % 2 or write_records_now(producer, n % 2, records) is None:
                await write_records(producer, n % 2, records)
        joined = records_from_batches(decode_produce(_kafka_batch(400, 10) + _kafka_batch(410, 15)))
        await write_records(producer, 0, joined)
    async with adiskq.Producer(compressed_path, compression="zstd", zstd_dictionary=dictionary) as producer:
        for n in range(3):
            await write_records(producer, 0, records_from_batches(decode_produce(_kafka_batch(n * 30, 30))))


def fixed_dictionary() -> bytes:
    """The compressed streams' dictionary: one trained once and kept beside this script."""
    return (Path(__file__).resolve().parent / "storage" / "format_dictionary.zstd").read_bytes()


async def write(root: str) -> None:
    """Write every stream of the script under ``root`` (an empty folder)."""
    dictionary = fixed_dictionary()
    steps: list[Callable[[], Awaitable[None]]] = [
        lambda: _singles(os.path.join(root, "singles")),
        lambda: _batched(os.path.join(root, "batched")),
        lambda: _many(os.path.join(root, "many")),
        lambda: _kafka_headers(os.path.join(root, "kafka-headers")),
        lambda: _compressed(os.path.join(root, "compressed"), dictionary),
        lambda: _shared(os.path.join(root, "shared")),
        lambda: _kafka(os.path.join(root, "kafka"), os.path.join(root, "kafka-compressed"), dictionary),
    ]
    with pinned_clock():
        for step in steps:
            await step()


def _comparable_bytes(path: str) -> bytes:
    """The file's bytes; for ``recovery.json``, with the modification times it notes of the clean
    close's files set to 0 (they are the machine's clock, not the data; the sizes are kept)."""
    raw = Path(path).read_bytes()
    if os.path.basename(path) != "recovery.json":
        return raw
    report = json.loads(raw)
    for files in report.get("clean_close", {}).values():
        for field, value in files.items():
            if field.endswith("_file") and isinstance(value, list):
                files[field] = [value[0], 0]
    return json.dumps(report, indent=2, sort_keys=True).encode()


def digests(root: str) -> dict[str, str]:
    """Every file under ``root`` but the process files, by its path relative to ``root``: its SHA-256."""
    found: dict[str, str] = {}
    for folder, subfolders, files in os.walk(root):
        subfolders[:] = sorted(name for name in subfolders if name not in PROCESS_FILES)
        for name in sorted(files):
            if name in PROCESS_FILES:
                continue
            path = os.path.join(folder, name)
            found[os.path.relpath(path, root)] = hashlib.sha256(_comparable_bytes(path)).hexdigest()
    return dict(sorted(found.items()))


def manifest_text(found: dict[str, str]) -> str:
    return "".join(f"{digest}  {path}\n" for path, digest in found.items())


def read_manifest() -> dict[str, str]:
    found: dict[str, str] = {}
    for line in MANIFEST.read_text().splitlines():
        digest, path = line.split("  ", 1)
        found[path] = digest
    return found


def differences(found: dict[str, str], expected: dict[str, str]) -> list[str]:
    """What differs, one line a file (empty: the same bytes everywhere)."""
    lines = [f"missing: {path}" for path in expected if path not in found]
    lines += [f"new: {path}" for path in found if path not in expected]
    lines += [f"changed: {path}" for path in found if path in expected and found[path] != expected[path]]
    return lines


def written_digests(backend: str = "asyncio") -> dict[str, str]:
    with tempfile.TemporaryDirectory(prefix="adiskq-format-") as root:
        anyio.run(write, root, backend=backend)
        return digests(root)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Compare (or, with --update, rewrite) the format manifest.")
    parser.add_argument("--update", action="store_true", help="overwrite the manifest with what this checkout writes")
    parser.add_argument("--backend", choices=("asyncio", "trio"), default="asyncio")
    args = parser.parse_args(argv)
    found = written_digests(args.backend)
    if args.update:
        MANIFEST.write_text(manifest_text(found))
        print(f"wrote {len(found)} digests to {MANIFEST}")
        return 0
    if not MANIFEST.exists():
        print(f"no manifest at {MANIFEST}: run with --update to write one", file=sys.stderr)
        return 1
    changed = differences(found, read_manifest())
    for line in changed:
        print(line)
    if changed:
        print("the bytes on disk differ from the manifest; after a deliberate format change, --update rewrites it")
        return 1
    print(f"all {len(found)} files match the manifest (compiled core: {adiskq.compiled})")
    return 0


if __name__ == "__main__":
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    sys.exit(main())
