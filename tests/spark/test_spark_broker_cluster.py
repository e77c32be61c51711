"""Spark reads the data dir of a cluster (``minikafka serve --brokers 3``), written by real clients.

Every partition has three replicas, one in each broker's ``node-<id>/`` dir; the reader must take
each partition from one of them (the leader the controller records, else the most complete
in-sync replica) up to that replica's checkpointed high watermark, so that Spark returns exactly
what a consumer reads from the cluster: each record once, none that was never committed. The
cluster is read after a clean stop, and while it runs with one broker crashed (a replica behind)
and a leader holding acks=1 records its followers never got (a replica ahead of the high
watermark). The ``export`` command goes through the same reader.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from minikafka.spark_export.export import add_parser, run_export
from minikafka.spark_export.files import LocalFiles
from minikafka.spark_export.layout import list_partitions
from minikafka.storage.checkpoints import read_offset_checkpoint
from minikafka.testkit import MiniKafkaCluster
from tests.cluster.test_cluster_failover import wait_for
from tests.cluster.test_cluster_high_watermarks import offsets as replica_offsets
from tests.doc_examples import example
from tests.spark.spark_helpers import project, spark, spark_rows  # noqa: F401
from tests.spark.test_spark_broker import consume_all, kafka_python_produce, make_records

COLS = ["topic", "partition", "offset", "key", "value", "timestamp_ms", "timestampType", "headers"]


def read(spark, data_dir: Path) -> list[dict[str, Any]]:  # noqa: F811
    return spark_rows(spark.read.format("minikafka").option("includeHeaders", "true").load(str(data_dir)))


def export_args(*argv: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="minikafka")
    add_parser(parser.add_subparsers(dest="command"))
    return parser.parse_args(["export", *argv])


def test_a_stopped_clusters_records_are_read_once_from_one_replica(spark, tmp_path):  # noqa: F811
    data_dir = tmp_path / "cluster"
    with MiniKafkaCluster(brokers=3, data_dir=data_dir, config={"log.segment.bytes": "65536"}) as kafka:
        kafka.create_topic("orders", partitions=3, replication_factor=3)
        kafka_python_produce(kafka.bootstrap, "orders", "lz4", make_records("cluster", 600, False), partitions=3)
        consumed = consume_all(kafka.bootstrap, ["orders"])
    assert len(consumed) == 600
    scope: dict[str, Any] = {}
    exec(example("broker-cluster", {"/var/lib/minikafka-cluster": str(data_dir)}), scope)  # docs/spark.md's
    assert sorted((r.partition, r["count"]) for r in scope["df"].groupBy("partition").count().collect()) == [
        (p, sum(1 for r in consumed if r["partition"] == p)) for p in range(3)]
    got = read(spark, data_dir)
    assert project(got, COLS) == project(consumed, COLS)
    assert len({(r["partition"], r["offset"]) for r in got}) == 600
    ends = {p: 1 + max(r["offset"] for r in consumed if r["partition"] == p) for p in range(3)}
    for pdir in list_partitions(LocalFiles(str(data_dir))):
        assert pdir.replica in (1, 2, 3) and pdir.high_watermark == ends[pdir.partition]
        assert len(pdir.segments) >= 2  # segments rolled: the read spans files

    out = tmp_path / "out.json"
    assert run_export(export_args("--data-dir", str(data_dir), "--out", str(out), "--format", "json",
                                  "--no-progress")) == 0
    lines = [json.loads(line) for p in sorted(out.glob("part-*")) for line in p.read_text().splitlines()]
    assert sorted((d["partition"], d["offset"]) for d in lines) == [(r["partition"], r["offset"]) for r in consumed]


def checkpointed(data_dir: Path, node: int) -> dict[tuple[str, int], int]:
    return read_offset_checkpoint(data_dir / f"node-{node}" / "replication-offset-checkpoint")


def test_replicas_behind_and_ahead_of_the_high_watermark_add_nothing(spark, tmp_path):  # noqa: F811
    data_dir = tmp_path / "cluster"
    config = {"replica.lag.time.max.ms": 60000, "replica.high.watermark.checkpoint.interval.ms": 50,
              "auto.leader.rebalance.enable": False}
    with MiniKafkaCluster(brokers=3, data_dir=data_dir, config=config) as kafka:
        kafka.create_topic("orders", partitions=2, replication_factor=3, config={"min.insync.replicas": "2"})
        kafka_python_produce(kafka.bootstrap, "orders", "none", make_records("a", 100, False))
        for p in (0, 1):
            kafka.wait_until_in_sync("orders", p)
        kafka.crash(3)  # its replicas stay behind
        kafka_python_produce(kafka.bootstrap, "orders", "none", make_records("b", 100, False))
        if kafka.leader("orders", 0) != 1:
            kafka.move_leader("orders", 0, 1)
        for node in (1, 2):  # a new leader's high watermark moves once its followers fetched from it
            wait_for(lambda n=node: replica_offsets(kafka, n, "orders", 0) == (100, 100), "the high watermark at 100")
        kafka.isolate(2, "brokers")  # in the ISR still: nothing more is committed on partition 0
        kafka_python_produce_acks_1(kafka.bootstrap, "orders", 7)
        wait_for(lambda: replica_offsets(kafka, 1, "orders", 0) == (100, 107), "the leader's uncommitted records")
        leaders = {p: kafka.leader("orders", p) for p in (0, 1)}
        highs = {p: replica_offsets(kafka, leaders[p], "orders", p)[0] for p in (0, 1)}  # type: ignore[index]
        wait_for(lambda: all(checkpointed(data_dir, leaders[p]).get(("orders", p)) == highs[p] for p in (0, 1)),
                 "the leaders' checkpoints")
        consumed = consume_all(kafka.bootstrap, ["orders"])
        assert len(consumed) == 200  # a consumer stops at the high watermark
        running = read(spark, data_dir)
        assert project(running, COLS) == project(consumed, COLS)
    stopped = read(spark, data_dir)
    assert project(stopped, COLS) == project(consumed, COLS)
    chosen = {p.partition: p for p in list_partitions(LocalFiles(str(data_dir)))}
    assert chosen[0].replica == 1 and chosen[0].high_watermark == 100  # its log reaches 107
    assert max(s.base_offset for s in chosen[0].segments) <= 100
    behind = {p.partition: p for p in list_partitions(LocalFiles(str(data_dir / "node-3")))}
    assert checkpointed(data_dir, 3)[("orders", 0)] <= 100 and behind[0].segments  # never chosen


def kafka_python_produce_acks_1(bootstrap: str, topic: str, count: int) -> None:
    """``count`` records to partition 0 with acks=1: the leader alone has them."""
    from kafka import KafkaProducer

    producer = KafkaProducer(bootstrap_servers=bootstrap, acks=1, linger_ms=0)
    futures = [producer.send(topic, key=b"extra", value=b"uncommitted %d" % i, partition=0) for i in range(count)]
    producer.flush(30)
    for fut in futures:
        fut.get(timeout=30)
    producer.close(timeout=10)
