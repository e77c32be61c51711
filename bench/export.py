"""Spark over minikafka's segments vs a kafka-python consumer, in one run (issue: Spark exporter).

``minikafka serve`` runs in a child process; confluent-kafka fills a 2-partition topic with
``--size`` bytes of segments. Then, over the same data in the same run:

* Spark (``--master``, default local[2]) runs a full-table aggregate through the ``minikafka``
  data source — ``count(*), sum(length(key)), sum(length(value)), max(offset)`` — twice: the first
  run includes starting the Python workers, the second is warm;
* a kafka-python consumer reads every record from the broker into Python and computes the same
  sums;
* with ``--ceiling``, the same aggregate over a data source that yields ready-made Arrow batches of
  the same rows: what Spark itself needs, without any file reading or decoding.

``--modes`` picks where Spark runs and reads (default all three, in one report):

* ``local`` — ``--master`` (default local[2]) over the broker's data dir;
* ``cluster`` — a Spark standalone cluster on 127.0.0.1 (a master and two workers, one core and
  1 GiB each, executors in their own JVMs) over the same data dir;
* ``s3`` — ``local[2]`` over a copy of the data dir in an S3-compatible store (moto's server on
  127.0.0.1, ``minikafka upload``), read through ``s3://`` with ranged GETs.

Prints records/s and MB/s (1 MB = 10^6 bytes of segment files) of each, and checks that all
saw the same records.

    .venv/bin/python -m bench.export [--size 256M] [--value-size 1024] [--codec none] [--ceiling]
                                     [--modes local,cluster,s3]
"""

from __future__ import annotations

import argparse
import os
import random
import shutil
import sys
import tempfile
import time

from bench._produce import produce_all
from bench._serve import serve

TOPIC = "bench-export"


def parse_size(text: str) -> int:
    units = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}
    text = text.strip().upper().removesuffix("IB").removesuffix("B")
    if text and text[-1] in units:
        return int(float(text[:-1]) * units[text[-1]])
    return int(text)


def payload_pool(kind: str) -> bytes:
    """1 MiB to cut values from: random bytes (incompressible) or JSON-like text (compresses ~4x)."""
    if kind == "random":
        return os.urandom(1 << 20)
    rng = random.Random(7)
    parts = []
    size = 0
    while size < 1 << 20:
        line = (f'{{"user":{rng.randint(1, 10**6)},"event":"{rng.choice(["view", "click", "buy"])}",'
                f'"page":"/item/{rng.randint(1, 5000)}","ms":{rng.randint(0, 10**4)}}}\n').encode()
        parts.append(line)
        size += len(line)
    return b"".join(parts)


def produce(bootstrap: str, records: int, value_size: int, codec: str, payload: str) -> float:
    from confluent_kafka import Producer

    producer = Producer({
        "bootstrap.servers": bootstrap,
        "acks": "1",
        "linger.ms": 20,
        "batch.size": 1_000_000,
        "queue.buffering.max.kbytes": 1_048_576,
        "compression.type": codec,
    })
    pool = payload_pool(payload)
    chunk = []
    for i in range(1000):
        start = (i * 7919) % (len(pool) - value_size)
        chunk.append({"key": b"key-%06d" % i, "value": pool[start : start + value_size], "partition": i % 2})
    started = time.perf_counter()
    produce_all(producer, TOPIC, chunk, records, 600)
    return time.perf_counter() - started


def segment_files(data_dir: str) -> list[str]:
    out = []
    for part in (0, 1):
        d = os.path.join(data_dir, f"{TOPIC}-{part}")
        out += [os.path.join(d, n) for n in os.listdir(d) if n.endswith(".log")]
    return out


def ceiling_source() -> type:
    """A data source with the ``minikafka`` schema that yields one ready-made Arrow batch over and
    over: no file reading, no decoding. Its scan time is what Spark itself needs for the rows."""
    from pyspark.sql.datasource import DataSource, DataSourceReader, InputPartition

    from minikafka.spark_export.source import spark_schema

    class CeilingReader(DataSourceReader):
        def __init__(self, options: dict[str, str]) -> None:
            self.records = int(options["records"])
            self.value_size = int(options["valuesize"])
            self.tasks = int(options["tasks"])

        def partitions(self) -> list[InputPartition]:
            share = -(-self.records // self.tasks)
            return [InputPartition(min(share, self.records - i * share)) for i in range(self.tasks)]

        def read(self, partition: InputPartition):  # type: ignore[no-untyped-def]
            import numpy as np
            import pyarrow as pa

            from minikafka.spark_export.arrow_build import arrow_schema, constant_string

            rows = 4096
            pool = os.urandom(1 << 20)
            values = pa.array([pool[i * 7 : i * 7 + self.value_size] for i in range(rows)], pa.binary())
            keys = pa.array([b"key-%06d" % i for i in range(rows)], pa.binary())
            batch = pa.RecordBatch.from_arrays(
                [keys, values, constant_string(TOPIC, rows), pa.array(np.zeros(rows, np.int32)),
                 pa.array(np.arange(rows, dtype=np.int64)), pa.array(np.zeros(rows, np.int64), pa.timestamp("us", tz="UTC")),
                 pa.array(np.zeros(rows, np.int32))], schema=arrow_schema(False, False))
            left = partition.value
            while left > 0:
                yield batch if left >= rows else batch.slice(0, left)
                left -= rows

    class CeilingSource(DataSource):
        @classmethod
        def name(cls) -> str:
            return "minikafka-ceiling"

        def schema(self):  # type: ignore[no-untyped-def]
            return spark_schema()

        def reader(self, schema):  # type: ignore[no-untyped-def]
            return CeilingReader(self.options)

    return CeilingSource


ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def spark_aggregate(data_dir: str, master: str, runs: int, value_size: int, ceiling: bool,
                    options: dict[str, str] | None = None,
                    conf: dict[str, str] | None = None) -> tuple[list[float], tuple[int, int, int, int], int, float | None]:
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    os.environ["PYTHONPATH"] = os.pathsep.join(filter(None, [ROOT, os.environ.get("PYTHONPATH")]))
    from pyspark.sql import SparkSession
    from pyspark.sql import functions as F

    from minikafka.spark_export import register

    builder = (
        SparkSession.builder.master(master).appName("bench-export")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.driver.memory", "2g")
    )
    for key, value in (conf or {}).items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    register(spark)
    try:
        times = []
        result: tuple[int, int, int, int] = (0, 0, 0, 0)
        for _ in range(runs):
            df = spark.read.format("minikafka").options(**(options or {})).option("subscribe", TOPIC).load(data_dir)
            started = time.perf_counter()
            row = df.agg(F.count("*"), F.sum(F.length("key")), F.sum(F.length("value")), F.max("offset")).collect()[0]
            times.append(time.perf_counter() - started)
            result = (int(row[0]), int(row[1]), int(row[2]), int(row[3]))
        tasks = df.rdd.getNumPartitions()
        ceiling_s = None
        if ceiling:
            spark.dataSource.register(ceiling_source())
            df = (spark.read.format("minikafka-ceiling").option("records", result[0])
                  .option("valueSize", value_size).option("tasks", tasks).load())
            started = time.perf_counter()
            row = df.agg(F.count("*"), F.sum(F.length("value"))).collect()[0]
            ceiling_s = time.perf_counter() - started
            assert row[0] == result[0]
        return times, result, tasks, ceiling_s
    finally:
        spark.stop()


def consume(bootstrap: str) -> tuple[float, tuple[int, int, int, int]]:
    from kafka import KafkaConsumer, TopicPartition

    consumer = KafkaConsumer(bootstrap_servers=bootstrap, group_id=None, enable_auto_commit=False,
                             fetch_max_bytes=64 << 20, max_partition_fetch_bytes=16 << 20)
    tps = [TopicPartition(TOPIC, p) for p in (0, 1)]
    consumer.assign(tps)
    consumer.seek_to_beginning(*tps)
    ends = consumer.end_offsets(tps)
    count = key_bytes = value_bytes = 0
    max_offset = -1
    started = time.perf_counter()
    try:
        while any(consumer.position(tp) < ends[tp] for tp in tps):
            for _tp, msgs in consumer.poll(timeout_ms=1000, max_records=100_000).items():
                for m in msgs:
                    count += 1
                    key_bytes += len(m.key) if m.key is not None else 0
                    value_bytes += len(m.value) if m.value is not None else 0
                    max_offset = max(max_offset, m.offset)
        elapsed = time.perf_counter() - started
    finally:
        consumer.close()
    return elapsed, (count, key_bytes, value_bytes, max_offset)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--size", default="256M", help="bytes of segments to write, e.g. 256M, 2G (default 256M)")
    parser.add_argument("--value-size", type=int, default=1024)
    parser.add_argument("--codec", default="none", choices=["none", "gzip", "snappy", "lz4", "zstd"])
    parser.add_argument("--payload", default="random", choices=["random", "text"],
                        help="value bytes: random (incompressible) or JSON-like text")
    parser.add_argument("--master", default="local[2]")
    parser.add_argument("--runs", type=int, default=2, help="Spark runs over the same data (first is cold)")
    parser.add_argument("--segment-bytes", type=int, default=128 << 20)
    parser.add_argument("--keep", action="store_true", help="keep the data directory afterwards")
    parser.add_argument("--ceiling", action="store_true",
                        help="also time the aggregate over ready-made Arrow batches (Spark's own share)")
    parser.add_argument("--modes", default="local,cluster,s3",
                        help="where Spark runs and reads: any of local, cluster, s3 (default all three)")
    args = parser.parse_args()

    size = parse_size(args.size)
    records = max(1, size // (args.value_size + 30))
    directory = tempfile.mkdtemp(prefix="minikafka-bench-export-", dir=os.environ.get("BENCH_DIR"))
    try:
        run(args, records, directory)
    finally:
        if args.keep:
            print(f"data directory kept: {directory}")
        else:
            shutil.rmtree(directory, ignore_errors=True)


#: Executors of the standalone cluster run: one per worker, within the worker's 1 GiB.
CLUSTER_CONF = {"spark.executor.memory": "512m", "spark.executor.cores": "1", "spark.cores.max": "2"}


def cluster_aggregate(data_dir: str, args: argparse.Namespace) -> tuple[list[float], tuple[int, int, int, int], int]:
    from tests.spark.spark_helpers import StandaloneCluster

    work = tempfile.mkdtemp(prefix="minikafka-bench-cluster-", dir=os.environ.get("BENCH_DIR"))
    cluster = StandaloneCluster(work, workers=2, pythonpath=ROOT)
    try:
        times, result, tasks, _ = spark_aggregate(data_dir, cluster.url, args.runs, args.value_size, False,
                                                  conf=CLUSTER_CONF)
        return times, result, tasks
    finally:
        cluster.stop()
        shutil.rmtree(work, ignore_errors=True)


def s3_aggregate(data_dir: str, args: argparse.Namespace) -> tuple[list[float], tuple[int, int, int, int], int, float]:
    import pyarrow.fs as pafs

    from minikafka.spark_export.files import Storage
    from tests.spark.spark_helpers import S3Server

    work = tempfile.mkdtemp(prefix="minikafka-bench-s3-", dir=os.environ.get("BENCH_DIR"))
    server = S3Server(work, "bench")
    try:
        url = "s3://bench/data"
        options = server.options()
        started = time.perf_counter()
        dest = Storage.from_options(url, options).files()
        # what ``minikafka upload`` does
        pafs.copy_files(data_dir, dest.root, source_filesystem=pafs.LocalFileSystem(),
                        destination_filesystem=dest.fs)  # type: ignore[attr-defined]
        upload_s = time.perf_counter() - started
        times, result, tasks, _ = spark_aggregate(url, "local[2]", args.runs, args.value_size, False,
                                                  options=options)
        return times, result, tasks, upload_s
    finally:
        server.stop()
        shutil.rmtree(work, ignore_errors=True)


def run(args: argparse.Namespace, records: int, directory: str) -> None:
    modes = [m.strip() for m in args.modes.split(",") if m.strip()]
    unknown = set(modes) - {"local", "cluster", "s3"}
    if unknown:
        raise SystemExit(f"unknown --modes {sorted(unknown)}: use local, cluster, s3")
    report: list[tuple[str, float, int]] = []
    results: dict[str, tuple[int, int, int, int]] = {}
    with serve("--config", f"log.segment.bytes={args.segment_bytes}", data_dir=directory) as (
        bootstrap, _proc, data_dir
    ):
        from confluent_kafka.admin import AdminClient, NewTopic

        admin = AdminClient({"bootstrap.servers": bootstrap})
        for fut in admin.create_topics([NewTopic(TOPIC, 2, 1)]).values():
            fut.result(30)
        del admin  # no client left to log reconnect attempts after the broker stops
        produce_s = produce(bootstrap, records, args.value_size, args.codec, args.payload)
        files = segment_files(data_dir)
        seg_bytes = sum(os.path.getsize(f) for f in files)
        mb = seg_bytes / 1e6
        print(f"segments: {mb:,.1f} MB in {len(files)} files, 2 partitions, {records:,} records, "
              f"{args.value_size} B {args.payload} values, codec {args.codec} (produced in {produce_s:.1f} s)")

        def show(label: str, times: list[float], result: tuple[int, int, int, int]) -> None:
            for i, t in enumerate(times):
                print(f"{label} ({'cold' if i == 0 else 'warm'}): {t:7.2f} s {result[0] / t:12,.0f} records/s "
                      f"{mb / t:9.1f} MB/s")
            report.append((label, min(times), result[0]))
            results[label] = result

        if "local" in modes:
            times, result, tasks, ceiling_s = spark_aggregate(data_dir, args.master, args.runs, args.value_size,
                                                              args.ceiling)
            show(f"spark {args.master}, {tasks} tasks, local files", times, result)
            if ceiling_s is not None:
                print(f"spark, same rows from ready-made Arrow batches: {ceiling_s:7.2f} s "
                      f"{result[0] / ceiling_s:12,.0f} records/s  (no file reading or decoding)")
        if "cluster" in modes:
            times, result, tasks = cluster_aggregate(data_dir, args)
            show(f"spark standalone, 2 workers x 1 core, {tasks} tasks, local files", times, result)
        if "s3" in modes:
            times, result, tasks, upload_s = s3_aggregate(data_dir, args)
            print(f"(copied to the S3 server in {upload_s:.1f} s)")
            show(f"spark local[2], {tasks} tasks, s3:// (moto server)", times, result)
        consume_s, consumer_result = consume(bootstrap)
        print(f"kafka-python consumer from the broker : {consume_s:7.2f} s {consumer_result[0] / consume_s:12,.0f} "
              f"records/s {mb / consume_s:9.1f} MB/s")
    print()
    print(f"{'reader (best run)':58} {'s':>7} {'records/s':>12} {'MB/s':>8} {'vs consumer':>12}")
    for label, best, count in report + [("kafka-python consumer", consume_s, consumer_result[0])]:
        print(f"{label:58} {best:7.2f} {count / best:12,.0f} {mb / best:8.1f} {consume_s / best:11.1f}x")
    for label, result in results.items():
        if result != consumer_result or result[0] != records:
            raise SystemExit(f"results differ: {label} {result}, consumer {consumer_result}, produced {records}")
    print(f"same records seen by all: count={records:,} value bytes={consumer_result[2]:,} "
          f"max offset={consumer_result[3]}")


if __name__ == "__main__":
    main()
