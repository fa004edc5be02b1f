"""A coverage-guided fuzzer (atheris) over the compiled Fetch request reader.

Each input is a Fetch request's payload as a hostile client could send it, read as the version its
first byte picks (4..16), from the offset its second byte picks: the compiled
``kafka_fetch_request`` must answer exactly as the pure-Python reference
(``adiskq/kafka/wire/fetch_request.py``) does — the same fields, or None alike — and never
crash, over-read or hang. Half the inputs start with a valid request's fixed fields, so the topic
and partition arrays are reached as often as the front.

    python tests/fuzz/fuzz_kafka_fetch.py -max_total_time=60          # a minute

Run by tests/fuzz/test_fuzz.py for a bounded time, and by scripts/sanitize under AddressSanitizer
and UndefinedBehaviorSanitizer.
"""

from __future__ import annotations

import struct
import sys

import atheris

with atheris.instrument_imports(include=["adiskq.kafka.wire.fetch_request"]):
    from adiskq.kafka.wire import fetch_request as reference

from adiskq._sansio.native import NATIVE


def _seeded(version: int, raw: bytes) -> bytes:
    """Half the inputs: the fixed fields a request of ``version`` starts with, then the fuzzer's bytes."""
    if not raw or raw[0] & 1 == 0:
        return raw
    front = (struct.pack(">i", -1) if version <= 14 else b"") + struct.pack(">iiib", 500, 1, 1 << 20, 0)
    if version >= 7:
        front += struct.pack(">ii", 0, -1)
    return front + raw[1:]


def test_one_input(raw: bytes) -> None:
    if len(raw) < 2 or NATIVE is None:
        return
    version = 4 + raw[0] % 13
    message = _seeded(version, raw[2:])
    at = raw[1] % (len(message) + 1) if raw[1] & 0x80 else 0
    got = NATIVE.kafka_fetch_request(message, at, version)
    want = reference.fetch_request_reference(message, at, version)
    if got != want:
        raise AssertionError(f"compiled {got!r} != reference {want!r} for {raw!r}")


def main() -> None:
    if NATIVE is None:
        raise SystemExit("the compiled core is not in use (built? ADISKQ_NO_EXTENSIONS set?): nothing to fuzz")
    atheris.Setup(sys.argv, test_one_input)
    atheris.Fuzz()


if __name__ == "__main__":
    main()
