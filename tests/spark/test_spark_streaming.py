"""``spark.readStream.format("minikafka")``: micro-batches over a data directory a real broker is
writing, Spark's Kafka offsets in the checkpoint, a restart from the checkpoint, and an idempotent
sink (Spark's parquet file sink) that ends with every record exactly once."""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from minikafka.broker.embedded import BrokerThread
from minikafka.spark_export.stream import rate_limit
from tests.kafka_wire import RawClient
from tests.scenario_helpers import create_topic
from tests.spark.spark_helpers import LogDirWriter, build_batch, spark  # noqa: F401
from tests.spark.test_spark_broker import consume_all

pytestmark = pytest.mark.spark_scale
T0 = 1_700_000_000_000
MAX_PER_TRIGGER = 300


class Producer(threading.Thread):
    """Writes ``v-<i>`` records to two partitions in chunks until told to stop (at most ``limit``)."""

    def __init__(self, bootstrap: str, topic: str, limit: int = 6000) -> None:
        super().__init__(daemon=True)
        self.bootstrap, self.topic, self.limit = bootstrap, topic, limit
        self.stop = threading.Event()
        self.sent = 0
        self.error: BaseException | None = None

    def run(self) -> None:
        from kafka import KafkaProducer

        producer = KafkaProducer(bootstrap_servers=self.bootstrap, enable_idempotence=True, linger_ms=2)
        try:
            while self.sent < self.limit and not self.stop.is_set():
                for _ in range(20):
                    producer.send(self.topic, key=b"k%d" % (self.sent % 7), value=b"v-%d" % self.sent,
                                  partition=self.sent % 2)
                    self.sent += 1
                producer.flush(30)
                self.stop.wait(0.05)  # a steady trickle, a few hundred records a second
        except BaseException as exc:  # noqa: BLE001 - reported by the test
            self.error = exc
        finally:
            producer.close(timeout=10)


def _wait(predicate: Any, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(0.2)
    raise TimeoutError(what)


def _batches_with_rows(query: Any) -> list[dict[str, Any]]:
    return [p for p in query.recentProgress if p["numInputRows"] > 0]


def _start(spark, data_dir: str, sink: Path, checkpoint: Path, **options: str) -> Any:  # noqa: F811
    df = (spark.readStream.format("minikafka").option("subscribe", "live").option("startingOffsets", "earliest")
          .option("maxOffsetsPerTrigger", str(MAX_PER_TRIGGER)).options(**options).load(data_dir))
    return (df.selectExpr("partition", "offset", "key", "value").writeStream.format("parquet")
            .option("path", str(sink)).option("checkpointLocation", str(checkpoint))
            .trigger(processingTime="500 milliseconds").start())


def test_three_micro_batches_then_a_restart_from_the_checkpoint_read_every_record_once(spark, tmp_path):  # noqa: F811
    data_dir = tmp_path / "data"
    broker = BrokerThread(data_dir=str(data_dir), port=0, config={"log.segment.bytes": "65536"}).start()
    producer = None
    try:
        with RawClient(broker.bootstrap) as raw:
            create_topic(raw, "live", partitions=2)
        producer = Producer(broker.bootstrap, "live")
        producer.start()
        _wait(lambda: producer.sent >= 200, 60, "the producer did not start")
        sink, checkpoint = tmp_path / "sink", tmp_path / "checkpoint"

        query = _start(spark, str(data_dir), sink, checkpoint)
        try:
            _wait(lambda: len(_batches_with_rows(query)) >= 3 or query.exception() is not None, 180,
                  "three micro-batches with records")
            assert query.exception() is None, query.exception()
            first_run = _batches_with_rows(query)
        finally:
            query.stop()
        assert producer.is_alive()  # still writing while the query was stopped and restarted
        for progress in first_run:
            assert progress["numInputRows"] <= MAX_PER_TRIGGER
            end = json.loads(progress["sources"][0]["endOffset"])
            assert set(end) == {"live"} and set(end["live"]) == {"0", "1"}  # Spark's Kafka offset shape

        # The checkpoint holds Kafka-shaped offsets; the restarted query continues from them.
        last_committed = max(int(p.name) for p in (checkpoint / "commits").iterdir() if p.name.isdigit())
        offsets_line = (checkpoint / "offsets" / str(last_committed)).read_text().splitlines()[-1]
        assert set(json.loads(offsets_line)["live"]) == {"0", "1"}

        query = _start(spark, str(data_dir), sink, checkpoint)
        try:
            _wait(lambda: len(_batches_with_rows(query)) >= 2 or query.exception() is not None, 180,
                  "two more micro-batches after the restart")
            producer.stop.set()
            producer.join(timeout=60)
            assert producer.error is None, producer.error
            query.processAllAvailable()
            assert query.exception() is None, query.exception()
        finally:
            query.stop()

        consumed = consume_all(broker.bootstrap, ["live"])
        assert len(consumed) == producer.sent
        rows = spark.read.parquet(str(sink)).collect()
        got = sorted((r["partition"], r["offset"], bytes(r["value"])) for r in rows)
        assert len(got) == len(set(got))  # nothing twice
        assert got == sorted((r["partition"], r["offset"], r["value"]) for r in consumed)  # nothing missing
    finally:
        if producer is not None:
            producer.stop.set()
            producer.join(timeout=60)
        broker.stop()


def test_starting_offsets_latest_and_json_and_new_data_as_it_lands(spark, tmp_path):  # noqa: F811
    w = LogDirWriter(str(tmp_path / "d"))
    for b in range(4):
        w.append("t", 0, build_batch([(b"k", b"old-%d" % b, T0 + b, [])] * 5))

    def run(starting: str, name: str) -> tuple[Any, list[Any]]:
        df = spark.readStream.format("minikafka").option("startingOffsets", starting).load(str(tmp_path / "d"))
        q = df.selectExpr("offset", "CAST(value AS STRING) AS v").writeStream.format("memory").queryName(name).start()
        q.processAllAvailable()
        return q, sorted(tuple(r) for r in spark.table(name).collect())

    latest, rows_latest = run("latest", "from_latest")
    from_json, rows_json = run('{"t":{"0":12}}', "from_json")
    try:
        assert rows_latest == []
        assert rows_json == [(o, f"old-{o // 5}") for o in range(12, 20)]
        w.append("t", 0, build_batch([(b"k", b"new", T0 + 9, [])] * 3))
        w.append("t", 1, build_batch([(b"k", b"new-partition", T0 + 9, [])] * 2))  # appears mid-stream
        latest.processAllAvailable()
        from_json.processAllAvailable()
        # new records of a known partition, and a new partition from its earliest offset
        new = [(0, "new-partition"), (1, "new-partition")] + [(o, "new") for o in range(20, 23)]
        assert sorted(tuple(r) for r in spark.table("from_latest").collect()) == new
        got = sorted(tuple(r) for r in spark.table("from_json").collect())
        assert [r for r in got if r[1].startswith("new")] == new
    finally:
        latest.stop()
        from_json.stop()
        w.close()
    with pytest.raises(Exception, match="ending offset not valid in streaming queries"):
        spark.readStream.format("minikafka").option("endingOffsets", "latest").load(str(tmp_path / "d")) \
            .writeStream.format("memory").queryName("bad").start().processAllAvailable()


def test_rate_limit_shares_offsets_in_proportion_to_each_backlog():
    begin = {("t", 0): 0, ("t", 1): 100, ("t", 2): 5}
    end = {("t", 0): 300, ("t", 1): 200, ("t", 2): 5}
    limited = rate_limit(begin, end, 40)
    assert sum(limited[tp] - begin[tp] for tp in end) == 40
    assert limited == {("t", 0): 30, ("t", 1): 110, ("t", 2): 5}
    assert rate_limit(begin, end, 1000) == end
    assert rate_limit({("t", 0): 0, ("t", 1): 0}, {("t", 0): 1, ("t", 1): 1}, 1) == {("t", 0): 1, ("t", 1): 0}


def test_the_streaming_example_of_the_docs_runs_as_written(spark, tmp_path):  # noqa: F811
    from tests.doc_examples import example

    w = LogDirWriter(str(tmp_path / "d"))
    for b in range(5):
        w.append("orders", b % 2, build_batch([(b"k", b"o-%d-%d" % (b, i), T0 + b, []) for i in range(4)]))
    w.close()
    code = example("streaming", {"/var/lib/minikafka": str(tmp_path / "d"), "/data/orders-checkpoint":
                                 str(tmp_path / "ck"), "/data/orders": str(tmp_path / "out")})
    exec(code, {"spark": spark})
    values = sorted(bytes(r["value"]) for r in spark.read.parquet(str(tmp_path / "out")).collect())
    assert values == sorted(b"o-%d-%d" % (b, i) for b in range(5) for i in range(4))
