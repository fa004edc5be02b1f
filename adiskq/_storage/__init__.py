"""The synchronous storage layer: segments, partitions, the stream and its offsets store.

The only layer that touches files; it never imports anyio.
"""
