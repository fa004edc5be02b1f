"""A writer of one Kafka transaction's records that is killed before their marker.

    python -m tests.support.transaction_writer PATH BACKEND

Pushes ``before``, then writes records of producer 77's transaction (``partition_writes``) one at a
time, printing each one's offset once written, then pushes ``after`` and prints it, forever
(each round one more transactional record and one more plain push), until it is killed: no marker
is ever written, so the transaction is open in the data it leaves.
"""

from __future__ import annotations

import sys

import anyio

import adiskq
from adiskq._async import partition_writes


async def main(path: str) -> None:
    async with adiskq.Producer(path, flush="sync") as producer:
        await producer.push(b"before")
        print("open", flush=True)
        number = 0
        while True:
            offset = await partition_writes.write(
                producer, 0, [adiskq.Record(b"t%d" % number, key=b"k")], transaction=(77, 0)
            )
            print(f"txn {offset}", flush=True)
            receipt = await producer.push(b"p%d" % number)
            print(f"plain {receipt.offset}", flush=True)
            number += 1


if __name__ == "__main__":
    anyio.run(main, sys.argv[1], backend=sys.argv[2])
