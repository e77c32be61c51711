"""Lets Spark find minikafka's data source by itself.

Spark registers every top-level ``pyspark_*`` module on its Python workers' path that exposes a
``DefaultSource`` data source, so ``spark.read.format("minikafka")`` works without a
``minikafka.spark_export.register(spark)`` call once minikafka is installed.

Spark looks these modules up once per JVM, in a fresh worker of ``PYSPARK_DRIVER_PYTHON``,
``PYSPARK_PYTHON`` or else ``python3`` from PATH (as set when the JVM started), with the current
directory first on its path. That interpreter may lack minikafka's dependencies, for example a
system ``python3`` run from a checkout of minikafka, which finds this directory. Then there is
nothing to offer here: the module defines no ``DefaultSource`` and Spark's lookup moves on quietly
instead of logging the import's traceback. ``register(spark)`` registers the source with the
driver's own interpreter either way.
"""

import sys

if sys.version_info >= (3, 11):  # noqa: UP036  (Spark may run an older python3 than minikafka needs)
    try:
        from minikafka.spark_export.source import MiniKafkaDataSource as DefaultSource
    except ModuleNotFoundError:  # a dependency (numpy, pyarrow, crc32c, ...) is not installed here
        pass
    else:
        __all__ = ["DefaultSource"]
