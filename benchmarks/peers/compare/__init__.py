"""adiskq beside the local queues a user would otherwise pick: one module per peer, run by ``worker.py``.

``benchmarks/peers/bench_compare.py`` is the entry point; each (peer, workload, run) runs in a fresh
process started from ``worker.py``, so no peer inherits another's caches, threads or memory.
"""
