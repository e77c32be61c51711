"""Lets Spark find minikafka's data source by itself.

Spark registers every top-level ``pyspark_*`` module on its Python workers' path that exposes a
``DefaultSource`` data source, so ``spark.read.format("minikafka")`` works without a
``minikafka.spark_export.register(spark)`` call once minikafka is installed.
"""

from minikafka.spark_export.source import MiniKafkaDataSource as DefaultSource

__all__ = ["DefaultSource"]
