"""The ``adiskq`` data source: its name, its schema, and the readers and writers it hands Spark."""

from __future__ import annotations

from typing import Final

from pyspark.sql.datasource import DataSource
from pyspark.sql.types import (
    BinaryType,
    IntegerType,
    LongType,
    MapType,
    StringType,
    StructField,
    StructType,
    TimestampType,
)

from ._encode import Columns
from ._options import InvalidOptionError, ReadOptions, WriteOptions
from ._reader import AdiskqBatchReader, AdiskqFilteringBatchReader
from ._sink import AdiskqStreamWriter
from ._stream_reader import AdiskqStreamReader
from ._writer import AdiskqBatchWriter, prepare_stream

__all__ = ["SCHEMA", "AdiskqDataSource"]

SCHEMA: Final = StructType(
    [
        StructField("partition", IntegerType()),
        StructField("offset", LongType()),
        StructField("timestamp", TimestampType()),
        StructField("key", BinaryType()),
        StructField("value", BinaryType()),
        StructField("headers", MapType(StringType(), BinaryType())),
        StructField("tag", StringType()),
    ]
)


class AdiskqDataSource(DataSource):
    """A Python data source for adiskq streams: batch and streaming reads and writes.

    Reading gives ``partition int, offset long, timestamp timestamp, key binary, value binary,
    headers map<string,binary>, tag string``; writing takes ``value`` (binary or string) and
    optionally ``key``, ``headers``, ``timestamp`` and ``tag``.
    """

    @classmethod
    def name(cls) -> str:
        """``spark.read.format("adiskq")``."""
        return "adiskq"

    def schema(self) -> StructType:
        """The columns every read gives."""
        return SCHEMA

    def reader(self, schema: StructType) -> AdiskqBatchReader:
        """A batch reader (``spark.read``); with the option ``pushFilters``, one that takes the tag filters.

        (PySpark refuses to plan a read whose reader implements ``pushFilters`` while
        ``spark.sql.python.filterPushdown.enabled`` is off, as it is by default: so the reader that
        implements it is only handed out when asked for.)"""
        options = ReadOptions.parse(self.options, streaming=False)
        return AdiskqFilteringBatchReader(options) if options.push_filters else AdiskqBatchReader(options)

    def streamReader(self, schema: StructType) -> AdiskqStreamReader:
        """A streaming reader (``spark.readStream``)."""
        return AdiskqStreamReader(ReadOptions.parse(self.options, streaming=True))

    def writer(self, schema: StructType, overwrite: bool) -> AdiskqBatchWriter:
        """A batch writer (``df.write.mode("append")``); a stream is append-only."""
        if overwrite:
            raise InvalidOptionError(
                "an adiskq stream is append-only: write with .mode('append') (messages are never overwritten)"
            )
        options = WriteOptions.parse(self.options)
        columns = Columns.of(schema)
        return AdiskqBatchWriter(options, columns, prepare_stream(options, tagged=columns.has_tag))

    def streamWriter(self, schema: StructType, overwrite: bool) -> AdiskqStreamWriter:
        """A streaming writer (``df.writeStream``), exactly once per (checkpointLocation, batchId)."""
        options = WriteOptions.parse(self.options)
        if options.checkpoint_location is None:
            raise InvalidOptionError(
                "a streaming write to adiskq needs .option('checkpointLocation', <local folder>): the sink keeps "
                "its record of committed batches there"
            )
        columns = Columns.of(schema)
        return AdiskqStreamWriter(
            options, options.checkpoint_location, columns, prepare_stream(options, tagged=columns.has_tag)
        )
