"""Read minikafka's (and Kafka's) log segments with Spark, in parallel, without a consumer.

``register(spark)`` makes ``spark.read.format("minikafka")`` available in a session; see
:mod:`minikafka.spark_export.source` for the data source and :mod:`.options` for its options.
PySpark (>= 4.0, the ``spark`` extra) is imported only when one of these is used, so the rest of
minikafka, including the ``export`` command's argument parser, works without it.
"""

from __future__ import annotations

import functools
import os
import sys
from typing import Any

SHORT_NAME = "minikafka"

__all__ = ["SHORT_NAME", "MiniKafkaDataSource", "register", "worker_python"]

#: What a Python worker must import to plan and read (the data source and its Arrow builder).
_WORKER_IMPORT = "import minikafka.spark_export.arrow_build, pyspark.sql.datasource"


class WorkerPythonError(RuntimeError):
    """Spark's Python workers would run an interpreter that cannot import minikafka."""


@functools.lru_cache(maxsize=8)  # one check per interpreter and process
def _cannot_import(python: str) -> str | None:
    """Why ``python`` cannot run the data source's workers on this machine, or None if it can."""
    import subprocess

    try:
        result = subprocess.run([python, "-c", _WORKER_IMPORT], capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return str(exc)
    if result.returncode == 0:
        return None
    lines = result.stderr.strip().splitlines()
    return lines[-1] if lines else f"exit code {result.returncode}"


def worker_python(spark: Any) -> str:
    """The interpreter the data source's Python workers should run.

    Spark starts its Python workers with ``PYSPARK_PYTHON``, or ``python3`` from PATH when it is
    not set, which is often not the interpreter (a virtualenv's) that has minikafka. When the user
    did not choose one, the workers run this interpreter, as ``minikafka export`` does. When the
    user did choose one and the master is local, it is checked here, so that a wrong choice fails
    now with a message saying what to do instead of deep inside the first query.
    """
    sc = spark.sparkContext
    chosen = os.environ.get("PYSPARK_PYTHON") or sc.getConf().get("spark.pyspark.python")
    if not chosen:
        return sys.executable
    if sc.master.startswith("local"):
        problem = _cannot_import(chosen)
        if problem is not None:
            raise WorkerPythonError(
                f"Spark's Python workers run {chosen!r} (PYSPARK_PYTHON / spark.pyspark.python), which cannot "
                f"import minikafka ({problem}). Set PYSPARK_PYTHON to an interpreter that has minikafka[spark] "
                f"installed, e.g. {sys.executable}, before the SparkSession starts, or leave it unset."
            )
    return chosen


def register(spark: Any) -> None:
    """Register the ``minikafka`` data source in ``spark`` (a SparkSession).

    The source's planning and reading workers run :func:`worker_python`; other Python code of the
    session (UDFs) keeps the session's own choice.
    """
    from minikafka.spark_export.source import MiniKafkaDataSource

    sc = spark.sparkContext
    python = worker_python(spark)
    saved = sc.pythonExec
    sc.pythonExec = python  # read by the wrapper that carries the source class to the JVM
    try:
        spark.dataSource.register(MiniKafkaDataSource)
    finally:
        sc.pythonExec = saved


def __getattr__(name: str) -> Any:
    if name == "MiniKafkaDataSource":
        from minikafka.spark_export.source import MiniKafkaDataSource

        return MiniKafkaDataSource
    raise AttributeError(name)
