"""JSON order events (the README's kind) and zstd dictionaries trained from them, for the tests of
compressed streams."""

from __future__ import annotations

import functools
import json
import random

import zstandard

from adiskq._sansio.compression import with_dictionary_id


def order_event(number: int, rng: random.Random) -> bytes:
    """One JSON order event of about 250 bytes."""
    return json.dumps(
        {
            "order_id": f"ord-{number:010d}",
            "customer_id": f"cust-{rng.randrange(100_000):06d}",
            "placed_at": f"2026-11-27T{rng.randrange(24):02d}:{rng.randrange(60):02d}:{rng.randrange(60):02d}Z",
            "status": rng.choice(["created", "paid", "packed", "shipped", "delivered"]),
            "items": [
                {
                    "sku": f"SKU-{rng.randrange(5000):05d}",
                    "qty": rng.randrange(1, 5),
                    "price": rng.randrange(100, 20000) / 100,
                }
                for _ in range(rng.randrange(1, 3))
            ],
            "shipping": {
                "method": rng.choice(["standard", "express", "pickup"]),
                "country": rng.choice(["FR", "DE", "NL"]),
            },
            "currency": "EUR",
            "total": rng.randrange(100, 90000) / 100,
        },
        separators=(",", ":"),
    ).encode()


def order_events(count: int, seed: int = 7) -> list[bytes]:
    """``count`` order events, the same ones for the same seed."""
    rng = random.Random(seed)
    return [order_event(number, rng) for number in range(count)]


@functools.cache
def trained_dictionary(seed: int = 7) -> bytes:
    """A 16 KiB zstd dictionary trained on 2,000 order events (a user's ``zstd_dictionary=``)."""
    return zstandard.train_dictionary(16384, order_events(2000, seed)).as_bytes()


def stream_dictionary(version: int = 1, seed: int = 7) -> bytes:
    """``trained_dictionary`` as a stream stores it as ``version`` (its id set to that version's)."""
    return with_dictionary_id(trained_dictionary(seed), version)
