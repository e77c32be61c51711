"""The ``minikafka`` Spark data source end to end, with a real local[2] SparkSession.

Log directories are written in Kafka's layout from producer batches (kafka-python's builder, the
bytes a producer sends); what Spark returns is compared record by record with kafka-python's own
decoding of the same files.
"""

from __future__ import annotations

import argparse
import base64
import json
import os
import random
import re
import struct
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from minikafka.spark_export.export import add_parser, run_export
from minikafka.spark_export.options import parse_options
from minikafka.spark_export.planner import plan_read
from tests.spark.spark_helpers import (
    LogDirWriter,
    build_batch,
    control_batch,
    expected_rows,
    project,
    spark,  # noqa: F401  (session fixture)
    spark_rows,
)

T0 = 1_700_000_000_000
CODECS = ["none", "gzip", "snappy", "lz4", "zstd"]
ALL = ["topic", "partition", "offset", "key", "value", "timestamp_ms", "timestampType", "headers", "producerId",
       "producerEpoch", "sequence", "isTransactional"]
BASE = ["topic", "partition", "offset", "key", "value", "timestamp_ms", "timestampType"]


def records(rng: random.Random, n: int, ts: int) -> list:
    return [
        (None if rng.random() < 0.2 else b"key-%d" % rng.randint(0, 99),
         None if rng.random() < 0.05 else os.urandom(rng.choice([0, 10, 200, 1500])),
         ts + rng.randint(-100, 100),
         [("trace-id", os.urandom(8)), ("empty", None)][: rng.randint(0, 2)])
        for _ in range(n)
    ]


@pytest.fixture(scope="module")
def logdir(tmp_path_factory) -> str:
    """Two topics, three partitions, every codec, idempotent and transactional batches, control
    batches, offset gaps, several segments per partition, a LogAppendTime topic."""
    root = str(tmp_path_factory.mktemp("logdir"))
    rng = random.Random(42)
    w = LogDirWriter(root, segment_bytes=150_000, index_interval=1500)
    for b in range(150):
        part = b % 2
        txn = b % 7 == 0
        w.append("orders", part, build_batch(records(rng, rng.randint(1, 30), T0 + b * 1000), codec=CODECS[b % 5],
                                             producer_id=1000 + part, producer_epoch=3, base_sequence=b * 40,
                                             transactional=txn))
        if txn:
            w.append("orders", part, control_batch(1000 + part, 3, T0 + b * 1000))
        if b % 17 == 0:
            w.skip_offsets("orders", part, 3)
    w.close(clean=False)
    lat = LogDirWriter(root, log_append_time_ms=T0 + 5)
    for b in range(10):
        lat.append("audit", 0, build_batch(records(rng, 5, T0 - 10_000), codec=CODECS[b % 5]))
    lat.close()
    return root


def expected(root: str, topics: list[str] | None = None) -> list[dict]:
    rows = expected_rows(root, topics)
    rows.sort(key=lambda r: (r["topic"], r["partition"], r["offset"]))
    return rows


def test_schema_is_spark_kafka_schema_plus_optional_columns(spark, logdir):  # noqa: F811
    plain = spark.read.format("minikafka").load(logdir)
    assert plain.schema.simpleString() == (
        "struct<key:binary,value:binary,topic:string,partition:int,offset:bigint,timestamp:timestamp,"
        "timestampType:int>"
    )
    full = spark.read.format("minikafka").option("includeHeaders", "true").option("includeProducerFields", "true")
    assert full.load(logdir).schema.simpleString().endswith(
        "timestampType:int,headers:array<struct<key:string,value:binary>>,producerId:bigint,"
        "producerEpoch:smallint,sequence:int,isTransactional:boolean>"
    )


def test_every_record_of_every_codec_matches_kafka_python(spark, logdir):  # noqa: F811
    df = (spark.read.format("minikafka").option("includeHeaders", "true").option("includeProducerFields", "true")
          .load(logdir))
    got = spark_rows(df)
    want = expected(logdir)
    assert len(got) == len(want) > 2000
    assert project(got, ALL) == project(want, ALL)
    by_topic = {(r["topic"], r["timestampType"]) for r in got}
    assert by_topic == {("orders", 0), ("audit", 1)}
    assert {r["timestamp_ms"] for r in got if r["topic"] == "audit"} == {T0 + 5}
    assert any(r["isTransactional"] for r in got) and any(r["headers"] is None for r in got)
    assert df.rdd.getNumPartitions() == len(plan_read(parse_options({"path": logdir}))[1])


def test_one_input_partition_per_kafka_partition_and_splits_keep_every_record(spark, logdir):  # noqa: F811
    partition_dirs = [d for d in os.listdir(logdir) if os.path.isdir(os.path.join(logdir, d))]
    segments = sum(len([n for n in os.listdir(os.path.join(logdir, d)) if n.endswith(".log")]) for d in partition_dirs)
    df = spark.read.format("minikafka").load(logdir)
    assert df.rdd.getNumPartitions() == len(partition_dirs) < segments
    assert project(spark_rows(df), BASE) == project(expected(logdir), BASE)
    split = spark.read.format("minikafka").option("maxBytesPerPartition", "40000").load(logdir)
    assert split.rdd.getNumPartitions() > 2 * segments
    assert project(spark_rows(split), BASE) == project(expected(logdir), BASE)
    capped = spark.read.format("minikafka").option("maxRecordsPerPartition", "200").load(logdir)
    sizes = capped.rdd.glom().map(len).collect()
    assert max(sizes) <= 200 and len(sizes) > segments and sum(sizes) == len(expected(logdir))
    assert spark.read.format("minikafka").option("minPartitions", "12").load(logdir).rdd.getNumPartitions() >= 12


def test_offset_and_timestamp_ranges(spark, logdir):  # noqa: F811
    want = [r for r in expected(logdir, ["orders"])]
    df = (spark.read.format("minikafka").option("subscribe", "orders")
          .option("startingOffsets", '{"orders":{"0":100,"1":-2}}')
          .option("endingOffsets", '{"orders":{"0":-1,"1":250}}').load(logdir))
    assert project(spark_rows(df), BASE) == project(
        [r for r in want if (r["partition"] == 0 and r["offset"] >= 100) or (r["partition"] == 1 and r["offset"] < 250)],
        BASE)

    lo, hi = T0 + 40_000, T0 + 90_000
    df = (spark.read.format("minikafka").option("subscribe", "orders").option("startingTimestamp", str(lo))
          .option("endingTimestamp", str(hi)).load(logdir))
    got = spark_rows(df)
    for part in (0, 1):
        rows = [r for r in want if r["partition"] == part]
        first = next(r["offset"] for r in rows if r["timestamp_ms"] >= lo)
        end = next(r["offset"] for r in rows if r["timestamp_ms"] >= hi)
        assert [r["offset"] for r in got if r["partition"] == part] == [
            r["offset"] for r in rows if first <= r["offset"] < end]


def test_options_errors_surface_when_the_dataframe_is_created(spark, logdir):  # noqa: F811
    with pytest.raises(Exception, match="can't be latest for batch queries"):
        spark.read.format("minikafka").option("startingOffsets", "latest").load(logdir).collect()
    with pytest.raises(Exception, match="fixed schema"):
        spark.read.format("minikafka").schema("a int").load(logdir).collect()
    empty = spark.read.format("minikafka").option("subscribe", "no-such-topic").load(logdir)
    assert empty.count() == 0 and len(empty.columns) == 7


def test_misspelt_and_unsupported_options_are_refused(spark, logdir):  # noqa: F811
    """A misspelt option would change the answer silently (``subscibe`` reads every topic): unknown
    names are refused with the names they are close to, for batch and streaming reads alike."""
    read = spark.read.format("minikafka")
    with pytest.raises(Exception, match=r"unknown option for the minikafka source: 'subscibe' "
                                        r"\(did you mean subscribe\?\)"):
        read.option("subscibe", "orders").load(logdir).collect()
    with pytest.raises(Exception, match=r"'startingoffset' \(did you mean startingOffsets"):
        spark.readStream.format("minikafka").option("startingOffset", "earliest").load(logdir) \
            .writeStream.format("memory").queryName("misspelt").start().processAllAvailable()
    with pytest.raises(Exception, match="'fs.s3a.acess.key' \\(did you mean fs.s3a.access.key"):
        read.option("fs.s3a.acess.key", "k").load(logdir).collect()
    with pytest.raises(Exception, match="reads one data directory"):
        read.load([logdir, logdir]).collect()
    with pytest.raises(Exception, match="minOffsetsPerTrigger is not supported"):
        spark.readStream.format("minikafka").option("minOffsetsPerTrigger", "10").load(logdir) \
            .writeStream.format("memory").queryName("unsupported").start().processAllAvailable()


def test_options_of_sparks_kafka_source_that_tune_its_consumer_are_accepted(spark, logdir, tmp_path):  # noqa: F811
    """A query written for ``format("kafka")`` runs unchanged: consumer settings change nothing,
    and ``kafka.isolation.level`` is honoured as ``isolationLevel`` is."""
    def kafka_query() -> Any:  # a new reader each time: a DataFrameReader's option() changes it
        return (spark.read.format("minikafka").option("kafka.bootstrap.servers", "broker:9092")
                .option("kafka.security.protocol", "SASL_SSL").option("groupIdPrefix", "reports")
                .option("kafkaConsumer.pollTimeoutMs", "1000").option("fetchOffset.numRetries", "5")
                .option("fetchOffset.retryIntervalMs", "10").option("subscribe", "orders"))

    assert project(spark_rows(kafka_query().load(logdir)), BASE) == project(expected(logdir, ["orders"]), BASE)

    w = LogDirWriter(str(tmp_path / "txn"))  # one aborted transaction between two plain batches
    w.append("orders", 0, build_batch([(b"k", b"before", T0, [])]))
    w.append("orders", 0, build_batch([(b"k", b"aborted", T0, [])], producer_id=7, producer_epoch=0,
                                      base_sequence=0, transactional=True))
    w.append("orders", 0, control_batch(7, 0, T0, commit=False))
    w.append("orders", 0, build_batch([(b"k", b"after", T0, [])]))
    w.close()
    for level, values in (("read_uncommitted", {b"before", b"aborted", b"after"}),
                          ("read_committed", {b"before", b"after"})):
        rows = spark_rows(kafka_query().option("kafka.isolation.level", level).load(str(tmp_path / "txn")))
        assert {r["value"] for r in rows} == values, level
    with pytest.raises(Exception, match="isolationLevel and kafka.isolation.level disagree"):
        kafka_query().option("kafka.isolation.level", "read_committed").option("isolationLevel", "read_uncommitted") \
            .load(logdir).collect()


def damaged_copy(tmp_path: Path) -> tuple[str, set[bytes]]:
    """A partition with a batch whose value bytes were flipped, and the keys of that batch."""
    w = LogDirWriter(tmp_path)
    for b in range(6):
        w.append("t", 0, build_batch([(b"b%d-%d" % (b, i), b"x" * 300, T0, []) for i in range(4)],
                                     codec=CODECS[b % 5]))
    w.close()
    seg = Path(w.segments("t", 0)[0])
    data = bytearray(seg.read_bytes())
    pos = 0
    for _ in range(3):
        pos += 12 + struct.unpack_from(">i", data, pos + 8)[0]
    data[pos + 80] ^= 0x55
    seg.write_bytes(data)
    return str(tmp_path), {b"b3-%d" % i for i in range(4)}


def test_corrupt_batch_fails_the_query_or_is_skipped(spark, tmp_path):  # noqa: F811
    root, lost = damaged_copy(tmp_path)
    with pytest.raises(Exception, match="CRC mismatch"):
        spark.read.format("minikafka").load(root).collect()
    rows = spark.read.format("minikafka").option("failOnDataLoss", "false").load(root).collect()
    keys = {bytes(r.key) for r in rows}
    assert len(rows) == 20 and not keys & lost


def test_torn_tail_ends_the_read_at_the_last_complete_batch(spark, tmp_path):  # noqa: F811
    w = LogDirWriter(tmp_path, segment_bytes=5000)
    for b in range(12):
        w.append("t", 0, build_batch([(b"k%d" % b, b"v" * 500, T0, [])] * 3, codec="lz4"))
    w.close(clean=False)
    with open(w.segments("t", 0)[-1], "ab") as f:
        f.write(bytes(build_batch([(b"torn", b"v" * 500, T0, [])] * 3))[:-100])
    df = spark.read.format("minikafka").load(str(tmp_path))
    assert [r.offset for r in df.orderBy("offset").collect()] == list(range(36))


def test_reading_while_a_writer_appends_gives_a_consistent_prefix(spark, tmp_path):  # noqa: F811
    w = LogDirWriter(tmp_path, segment_bytes=20_000, index_interval=1000)
    for b in range(20):
        w.append("live", b % 2, build_batch([(b"k", os.urandom(200), T0 + b, [])] * 5, codec="zstd"))
    stop = threading.Event()

    def writer() -> None:
        b = 20
        while not stop.is_set() and b < 4000:
            w.append("live", b % 2, build_batch([(b"k", os.urandom(200), T0 + b, [])] * 5, codec="zstd"))
            b += 1

    thread = threading.Thread(target=writer)
    thread.start()
    try:
        counts = []
        for _ in range(3):
            rows = spark.read.format("minikafka").load(str(tmp_path)).select("partition", "offset").collect()
            for part in (0, 1):
                offsets = sorted(r.offset for r in rows if r.partition == part)
                assert offsets == list(range(len(offsets))) and len(offsets) >= 50
            counts.append(len(rows))
    finally:
        stop.set()
        thread.join()
        w.close()
    assert counts == sorted(counts)


def _export_args(*argv: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="minikafka")
    add_parser(parser.add_subparsers(dest="command"))
    return parser.parse_args(["export", *argv])


def test_export_command_writes_parquet_json_and_csv(spark, logdir, tmp_path, capsys):  # noqa: F811
    want = expected(logdir, ["orders"])
    out = tmp_path / "out.parquet"
    code = run_export(_export_args("--data-dir", logdir, "--out", str(out), "--topics", "orders",
                                   "--include-headers", "--no-progress"))
    assert code == 0
    err = capsys.readouterr().err
    assert f"{len(want)} records in the output" in err
    got = spark_rows(spark.read.parquet(str(out)))
    assert project(got, BASE + ["headers"]) == project(want, BASE + ["headers"])

    out = tmp_path / "out.json"
    assert run_export(_export_args("--data-dir", logdir, "--out", str(out), "--format", "json", "--topics",
                                   "orders", "--ending-offsets", '{"orders":{"0":10,"1":10}}')) == 0
    lines = [json.loads(line) for p in sorted(out.glob("part-*")) for line in p.read_text().splitlines()]
    assert sorted((d["partition"], d["offset"]) for d in lines) == sorted(
        (r["partition"], r["offset"]) for r in want if r["offset"] < 10)

    out = tmp_path / "out.csv"
    assert run_export(_export_args("--data-dir", logdir, "--out", str(out), "--format", "csv", "--topics",
                                   "audit", "--include-headers", "--no-progress")) == 0
    parts = [p.read_text().splitlines() for p in sorted(out.glob("part-*"))]
    header = "key,value,topic,partition,offset,timestamp,timestampType,headers"
    assert parts and all(lines[0] == header for lines in parts)  # a header row in every file
    text = "\n".join(line for lines in parts for line in lines[1:])
    audit = expected(logdir, ["audit"])
    assert len(text.splitlines()) == len(audit)
    assert all(base64.b64encode(r["value"]).decode() in text for r in audit if r["value"])

    assert run_export(_export_args("--data-dir", str(tmp_path / "missing"), "--out", str(tmp_path / "x"))) == 2
    assert run_export(_export_args("--data-dir", logdir, "--out", str(tmp_path / "y"),
                                   "--starting-offsets", "latest")) == 2
    assert spark.range(3).count() == 3  # the shared session survived the command


def test_export_progress_display_reports_tasks(spark):  # noqa: F811
    import io

    from minikafka.spark_export.export import Progress

    out = io.StringIO()
    with Progress(spark.sparkContext, out, interval=0.2):
        spark.sparkContext.parallelize(range(4), 4).map(lambda x: time.sleep(1.0) or x).count()
    assert "/4 tasks done" in out.getvalue()


def test_export_progress_counts_only_the_export_s_own_tasks(spark):  # noqa: F811
    """Another thread's job in a shared session is not counted, and the finished stage still is:
    the counts at the end are the tasks that ran."""
    import io

    from minikafka.spark_export.export import Progress

    started = threading.Event()

    def other_job() -> None:
        started.set()
        spark.sparkContext.parallelize(range(6), 6).map(lambda x: time.sleep(0.5) or x).count()

    other = threading.Thread(target=other_job)
    out = io.StringIO()
    with Progress(spark.sparkContext, out, interval=0.2) as progress:
        other.start()
        started.wait(10)
        spark.sparkContext.parallelize(range(3), 3).map(lambda x: time.sleep(1.0) or x).count()
    other.join(120)
    assert progress.counts() == (3, 0, 3)
    assert all(line.split()[1].endswith("/3") for line in out.getvalue().splitlines()), out.getvalue()


def test_export_plan_line_and_summary_count_the_same_tasks(spark, logdir, tmp_path, capsys):  # noqa: F811
    code = run_export(_export_args("--data-dir", logdir, "--out", str(tmp_path / "out"), "--topics", "orders",
                                   "--option", "maxRecordsPerPartition=400", "--no-progress"))
    assert code == 0
    err = capsys.readouterr().err
    planned = re.search(r"slices in (\d+) tasks", err)
    ran = re.search(r"done in [\d.]+ s, (\d+)/(\d+) tasks", err)
    assert planned and ran, err
    assert int(planned[1]) > 2  # the two partitions, split by offset count
    assert ran.groups() == (planned[1], planned[1])


ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.skipif(not (ROOT / "pyspark_minikafka" / "__init__.py").exists(),
                    reason="the pyspark_minikafka discovery module is not in this tree")
def test_spark_discovers_the_source_without_register(logdir, tmp_path):
    """Spark registers Python data sources from top-level ``pyspark_*`` modules on its path."""
    import subprocess
    import sys

    script = (
        "from pyspark.sql import SparkSession\n"
        "s = (SparkSession.builder.master('local[1]').config('spark.ui.enabled', 'false')\n"
        "     .config('spark.ui.showConsoleProgress', 'false').getOrCreate())\n"
        f"print('COUNT', s.read.format('minikafka').load({logdir!r}).count())\n"
        "s.stop()\n"
    )
    env = {**os.environ, "PYTHONPATH": str(ROOT), "PYSPARK_PYTHON": sys.executable, "SPARK_LOCAL_IP": "127.0.0.1"}
    result = subprocess.run([sys.executable, "-c", script], env=env, cwd=tmp_path, capture_output=True, text=True,
                            timeout=300)
    assert f"COUNT {len(expected(logdir))}" in result.stdout, result.stderr[-3000:]


def test_export_reads_exactly_the_planned_snapshot_while_the_log_grows(spark, tmp_path):  # noqa: F811
    """The plan line and the job see the same cut: the command pins the planned offsets, so
    records appended after planning are not read."""
    from minikafka.spark_export.export import pinned_options, source_options
    from minikafka.spark_export.planner import plan_ranges

    w = LogDirWriter(str(tmp_path / "d"))
    for b in range(6):
        w.append("t", b % 2, build_batch([(b"k", b"v%d" % b, T0 + b, [])] * 3))
    args = _export_args("--data-dir", str(tmp_path / "d"), "--out", str(tmp_path / "o"), "--topics", "t",
                        "--starting-timestamp", str(T0 + 2))
    opts = source_options(args)
    ranges, slices = plan_ranges(parse_options({**opts, "path": str(tmp_path / "d")}))
    planned = sum(s.end_offset - s.start_offset for s in slices)
    for b in range(6, 12):  # the broker keeps writing after the plan line was printed
        w.append("t", b % 2, build_batch([(b"k", b"v%d" % b, T0 + b, [])] * 3))
    w.close()
    pinned = pinned_options(opts, ranges)
    assert "subscribe" not in pinned and "startingTimestamp" not in pinned
    got = spark_rows(spark.read.format("minikafka").options(**pinned).load(str(tmp_path / "d")))
    assert len(got) == planned == 12  # batches 2..5, three records each
    assert {r["value"] for r in got} == {b"v%d" % b for b in range(2, 6)}
    unpinned = spark.read.format("minikafka").options(**opts).load(str(tmp_path / "d")).count()
    assert unpinned == 30

