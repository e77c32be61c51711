"""The ``minikafka`` data source on a real Spark standalone cluster: a master and two workers
started from the pyspark installation's ``spark-class`` on 127.0.0.1, one core and 1 GiB each,
so the read runs in two executor JVMs with their own Python workers, apart from the driver.

A real broker is written to by kafka-python; the cluster read must return what a kafka-python
consumer reads from the broker, and what the same read on ``local[2]`` returns. A data directory
that only the driver can see (a relative path: the driver and the executors have different working
directories) must fail with an error saying so, not return an empty result.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from minikafka.broker.embedded import BrokerThread
from tests.doc_examples import example
from tests.kafka_wire import RawClient
from tests.scenario_helpers import create_topic
from tests.spark.spark_helpers import StandaloneCluster, project, spark, spark_rows  # noqa: F401
from tests.spark.test_spark_broker import consume_all, kafka_python_produce, make_records

pytestmark = pytest.mark.spark_scale
ROOT = Path(__file__).resolve().parents[2]
COLS = ["topic", "partition", "offset", "key", "value", "timestamp_ms", "timestampType", "headers"]


@pytest.fixture(scope="module")
def cluster(tmp_path_factory) -> Iterator[StandaloneCluster]:
    c = StandaloneCluster(tmp_path_factory.mktemp("cluster"))
    try:
        yield c
    finally:
        c.stop()


@pytest.fixture(scope="module")
def broker_data(tmp_path_factory) -> Iterator[tuple[str, list[dict[str, Any]]]]:
    data_dir = tmp_path_factory.mktemp("clusterdata") / "data"
    broker = BrokerThread(data_dir=str(data_dir), port=0, config={"log.segment.bytes": "65536"}).start()
    try:
        with RawClient(broker.bootstrap) as raw:
            create_topic(raw, "events", partitions=3)
        kafka_python_produce(broker.bootstrap, "events", "lz4", make_records("cluster", 900, False), partitions=3)
        yield str(data_dir), consume_all(broker.bootstrap, ["events"])
    finally:
        broker.stop()


# The driver: the cluster example of docs/spark.md as written, then the test's own checks.
CHECKS = r'''
import json, os, sys, time
master, data_dir, out = sys.argv[1:4]
jsc = spark.sparkContext._jsc.sc()
deadline = time.monotonic() + 120
while jsc.getExecutorMemoryStatus().size() < 3 and time.monotonic() < deadline:  # the driver + 2 executors
    time.sleep(0.2)
result = {"executors": jsc.getExecutorMemoryStatus().size() - 1, "count": df.count()}
result["partitions"] = df.rdd.getNumPartitions()
rows = []
for r in df.orderBy("topic", "partition", "offset").collect():
    d = r.asDict(recursive=True)
    rows.append([d["topic"], d["partition"], d["offset"], None if d["key"] is None else bytes(d["key"]).hex(),
                 None if d["value"] is None else bytes(d["value"]).hex(), round(d["timestamp"].timestamp() * 1000),
                 d["timestampType"],
                 None if d["headers"] is None else [[h["key"], None if h["value"] is None else bytes(h["value"]).hex()]
                                                    for h in d["headers"]]])
result["rows"] = rows
# A relative path resolves against the driver's working directory, which the executors do not share.
os.symlink(data_dir, "driver-only")
for fail in ("true", "false"):
    try:
        n = spark.read.format("minikafka").option("failOnDataLoss", fail).load("driver-only").count()
        result["driver_only_" + fail] = f"returned {n} rows"
    except Exception as exc:
        result["driver_only_" + fail] = str(exc)
with open(out, "w") as f:
    json.dump(result, f)
spark.stop()
'''
#: What the 1-core, 1 GiB workers can hold, passed the way spark-submit options reach a Python driver.
SUBMIT_ARGS = ("--conf spark.executor.memory=512m --conf spark.executor.cores=1 --conf spark.cores.max=2 "
               "--conf spark.ui.enabled=false --conf spark.ui.showConsoleProgress=false "
               "--conf spark.sql.session.timeZone=UTC --conf spark.task.maxFailures=1 pyspark-shell")


def _decode(row: list[Any]) -> dict[str, Any]:
    topic, partition, offset, key, value, ts, ts_type, headers = row
    return {"topic": topic, "partition": partition, "offset": offset,
            "key": None if key is None else bytes.fromhex(key), "value": None if value is None else bytes.fromhex(value),
            "timestamp_ms": ts, "timestampType": ts_type,
            "headers": None if headers is None else [(k, None if v is None else bytes.fromhex(v)) for k, v in headers]}


def test_standalone_cluster_reads_what_the_consumer_and_local_mode_read(spark, cluster, broker_data,  # noqa: F811
                                                                       tmp_path):
    data_dir, consumed = broker_data
    out = tmp_path / "result.json"
    driver = example("cluster", {"spark://spark-master:7077": cluster.url, "/opt/minikafka/bin/python": sys.executable,
                                 "/mnt/shared/minikafka": data_dir}) + CHECKS
    env = {**cluster.env, "PYSPARK_SUBMIT_ARGS": SUBMIT_ARGS}
    proc = subprocess.run([sys.executable, "-c", driver, cluster.url, data_dir, str(out)], env=env, cwd=tmp_path,
                          capture_output=True, text=True, timeout=400)
    assert proc.returncode == 0 and out.exists(), proc.stderr[-4000:]
    result = json.loads(out.read_text())
    assert result["executors"] == 2
    assert f"\n{len(consumed)}\n" in f"\n{proc.stdout}"  # the example's print(df.count())
    assert result["partitions"] >= 3
    got = [_decode(r) for r in result["rows"]]
    assert len(got) == len(consumed) == 900
    assert project(got, COLS) == project(consumed, COLS)
    local = spark_rows(spark.read.format("minikafka").option("includeHeaders", "true").load(data_dir))
    assert project(local, COLS) == project(got, COLS)
    for fail in ("true", "false"):  # never an empty result, whatever failOnDataLoss says
        message = result["driver_only_" + fail]
        assert "is not readable on host" in message, message[-2000:]
        assert "every Spark executor must see the data directory at the same path as the driver" in message
