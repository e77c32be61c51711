"""Read minikafka's (and Kafka's) log segments with Spark, in parallel, without a consumer.

``register(spark)`` makes ``spark.read.format("minikafka")`` available in a session; see
:mod:`minikafka.spark_export.source` for the data source and :mod:`.options` for its options.
PySpark (>= 4.0, the ``spark`` extra) is imported only when one of these is used, so the rest of
minikafka, including the ``export`` command's argument parser, works without it.
"""

from __future__ import annotations

from typing import Any

SHORT_NAME = "minikafka"

__all__ = ["SHORT_NAME", "MiniKafkaDataSource", "register"]


def register(spark: Any) -> None:
    """Register the ``minikafka`` data source in ``spark`` (a SparkSession)."""
    from minikafka.spark_export.source import MiniKafkaDataSource

    spark.dataSource.register(MiniKafkaDataSource)


def __getattr__(name: str) -> Any:
    if name == "MiniKafkaDataSource":
        from minikafka.spark_export.source import MiniKafkaDataSource

        return MiniKafkaDataSource
    raise AttributeError(name)
