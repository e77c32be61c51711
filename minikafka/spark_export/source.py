"""The Spark 4 Python data source ``minikafka``: log segments as a DataFrame.

::

    from minikafka.spark_export import register
    register(spark)
    df = spark.read.format("minikafka").option("subscribe", "orders").load("/var/lib/minikafka")

The schema is the one of Spark's own Kafka source (key, value, topic, partition, offset, timestamp,
timestampType, and headers with ``includeHeaders``), so queries written for ``format("kafka")``
run unchanged. Options are described in :mod:`minikafka.spark_export.options`.

Planning (:mod:`.planner`) runs on the driver; each input partition is a run of consecutive
slices of one partition's segment files, read by a task with plain file reads, so executors must
see the same files (one machine, or a shared file system).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

from pyspark.sql.datasource import DataSource, DataSourceReader, DataSourceStreamReader, InputPartition
from pyspark.sql.types import (
    ArrayType,
    BinaryType,
    BooleanType,
    IntegerType,
    LongType,
    ShortType,
    StringType,
    StructField,
    StructType,
    TimestampType,
)

from minikafka.spark_export.errors import ExportOptionError
from minikafka.spark_export.options import ReadOptions, column_options, parse_options
from minikafka.spark_export.scan import SegmentSlice

SHORT_NAME = "minikafka"

HEADERS_TYPE = ArrayType(StructType([StructField("key", StringType()), StructField("value", BinaryType())]))


def spark_schema(include_headers: bool = False, include_producer_fields: bool = False) -> StructType:
    """Spark's Kafka source schema, plus the optional producer columns."""
    fields = [
        StructField("key", BinaryType()),
        StructField("value", BinaryType()),
        StructField("topic", StringType()),
        StructField("partition", IntegerType()),
        StructField("offset", LongType()),
        StructField("timestamp", TimestampType()),
        StructField("timestampType", IntegerType()),
    ]
    if include_headers:
        fields.append(StructField("headers", HEADERS_TYPE))
    if include_producer_fields:
        fields += [
            StructField("producerId", LongType()),
            StructField("producerEpoch", ShortType()),
            StructField("sequence", IntegerType()),
            StructField("isTransactional", BooleanType()),
        ]
    return StructType(fields)


class SlicePartition(InputPartition):
    """One Spark input partition: consecutive :class:`SegmentSlice` of one partition, in offset
    order (picklable, a few hundred bytes each)."""

    def __init__(self, slices: Sequence[SegmentSlice]) -> None:
        super().__init__(tuple(slices))
        self.slices = tuple(slices)


class MiniKafkaReader(DataSourceReader):
    def __init__(self, opts: ReadOptions) -> None:
        self.opts = opts

    def partitions(self) -> list[InputPartition]:
        from minikafka.spark_export.planner import plan_read

        return [SlicePartition(part) for part in plan_read(self.opts)[1]]

    def read(self, partition: InputPartition) -> Iterator[Any]:
        yield from read_slice(self.opts, partition)


def read_slice(opts: ReadOptions, partition: InputPartition) -> Iterator[Any]:
    """The Arrow record batches of one input partition (batch and streaming reads alike)."""
    if not isinstance(partition, SlicePartition):
        return  # Spark's placeholder partition when the plan is empty
    from minikafka.spark_export.arrow_build import arrow_schema
    from minikafka.spark_export.slice_reader import read_slices

    schema = arrow_schema(opts.include_headers, opts.include_producer_fields)
    yield from read_slices(partition.slices, schema, opts.fail_on_data_loss, opts.storage.files(),
                           read_committed=opts.read_committed)


class MiniKafkaDataSource(DataSource):
    """``spark.read.format("minikafka").load(<data dir>)``."""

    @classmethod
    def name(cls) -> str:
        return SHORT_NAME

    def schema(self) -> StructType:
        return spark_schema(*column_options(self.options))  # batch or stream: the reader checks the rest

    def _checked(self, schema: StructType, streaming: bool) -> ReadOptions:
        opts = parse_options(self.options, streaming=streaming)
        expected = spark_schema(opts.include_headers, opts.include_producer_fields)
        if schema != expected:
            raise ExportOptionError(
                f"the minikafka source has a fixed schema and cannot be read with a custom one: {schema.simpleString()}"
            )
        return opts

    def reader(self, schema: StructType) -> DataSourceReader:
        return MiniKafkaReader(self._checked(schema, streaming=False))

    def streamReader(self, schema: StructType) -> DataSourceStreamReader:
        from minikafka.spark_export.stream import MiniKafkaStreamReader

        return MiniKafkaStreamReader(self._checked(schema, streaming=True))
