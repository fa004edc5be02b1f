"""adiskq for Apache Spark: a PySpark (4.x) data source named ``adiskq``.

::

    import adiskq.spark

    adiskq.spark.register(spark)  # once per SparkSession
    df = spark.read.format("adiskq").load("/data/events")
    query = (
        spark.readStream.format("adiskq").option("startingOffsets", "earliest").load("/data/events")
        .writeStream.format("adiskq").option("checkpointLocation", "/data/ckpt").start("/data/out")
    )

Reads (batch and streaming) give ``partition, offset, timestamp, key, value, headers`` as Arrow
batches; writes append ``value`` (and optionally ``key``, ``headers``, ``timestamp``), streaming writes
exactly once per (checkpointLocation, batchId). Needs the ``spark`` extra: ``pip install adiskq[spark]``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .._extras import needs_extra

with needs_extra("spark", "adiskq's Spark data source"):
    from ._arrow import TransactionOpenError as TransactionOpenError
    from ._encode import InvalidColumnsError as InvalidColumnsError
    from ._options import InvalidOptionError as InvalidOptionError
    from ._source import SCHEMA as SCHEMA
    from ._source import AdiskqDataSource as AdiskqDataSource

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

__all__ = [
    "SCHEMA",
    "AdiskqDataSource",
    "InvalidColumnsError",
    "InvalidOptionError",
    "TransactionOpenError",
    "register",
]


def register(spark: SparkSession | None = None) -> None:
    """Make ``format("adiskq")`` known to ``spark`` (by default the active session)."""
    if spark is None:
        from pyspark.sql import SparkSession

        spark = SparkSession.getActiveSession()
        if spark is None:
            raise RuntimeError("no active SparkSession: create one first, or pass it: adiskq.spark.register(spark)")
    spark.dataSource.register(AdiskqDataSource)
