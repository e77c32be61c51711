"""``isolationLevel`` on the Spark source: read_uncommitted returns every record but the control
records; read_committed leaves out the records of aborted transactions and stops at the last
stable offset (the first offset of the earliest transaction still open).

Storage level: a data dir written by minikafka's own PartitionLog (transactional batches from
kafka-python's builder, markers from ``append_marker``), two transactional producers interleaved
with plain records, committed, aborted and open transactions over several segments; the expected
rows come from what the test wrote, and the aborted transactions found from the batch headers are
checked against the ``.txnindex`` files the broker wrote. End to end: a real broker, a real
transactional producer, and a read_committed consumer; Spark must return what that consumer saw.
"""

from __future__ import annotations

import argparse
import struct
from pathlib import Path
from typing import Any

import pytest

from minikafka.broker.embedded import BrokerThread
from minikafka.spark_export.export import add_parser, run_export
from minikafka.spark_export.files import LocalFiles
from minikafka.spark_export.layout import list_partitions
from minikafka.spark_export.options import parse_options
from minikafka.spark_export.planner import plan
from minikafka.spark_export.transactions import AbortedTxn, transaction_state
from minikafka.storage.log import PartitionLog
from tests.kafka_wire import RawClient
from tests.scenario_helpers import create_topic
from tests.spark.spark_helpers import build_batch, spark  # noqa: F401
from tests.storage_helpers import TS, topic_config

A, B = 1000, 2000  # two transactional producers' ids


def _batch(value: bytes, pid: int = -1, seq: int = -1, transactional: bool = False) -> bytearray:
    return build_batch([(b"k", value, TS, [])], producer_id=pid, producer_epoch=0 if pid >= 0 else -1,
                       base_sequence=seq, transactional=transactional)


class History:
    """Writes one partition through PartitionLog and remembers what each record's fate is."""

    def __init__(self, directory: Path) -> None:
        self.log = PartitionLog.open("t", 0, directory, topic_config(segment_bytes=400), now_ms=lambda: TS)
        self.seq = {A: 0, B: 0}
        self.open: dict[int, list[bytes]] = {A: [], B: []}
        self.values: list[bytes] = []  # every data record, in offset order
        self.committed: set[bytes] = set()  # what read_committed may show (below the LSO)
        self.lso: int | None = None

    def plain(self, value: bytes) -> None:
        self.log.append_from_client(_batch(value))
        self.values.append(value)
        self.committed.add(value)

    def txn(self, pid: int, value: bytes) -> None:
        result = self.log.append_from_client(_batch(value, pid, self.seq[pid], transactional=True))
        if not self.open[pid] and self.lso is None and pid == A and value.startswith(b"open"):
            self.lso = result.base_offset
        self.seq[pid] += 1
        self.open[pid].append(value)
        self.values.append(value)

    def end(self, pid: int, commit: bool) -> None:
        self.log.append_marker(pid, 0, commit, 0)
        if commit:
            self.committed.update(self.open[pid])
        self.open[pid] = []


@pytest.fixture(scope="module")
def txn_dir(tmp_path_factory) -> tuple[str, History, set[bytes]]:
    root = tmp_path_factory.mktemp("txn") / "data"
    root.mkdir()
    (root / "meta.properties").write_text("version=1\nbroker.id=0\ncluster.id=txn\n")
    h = History(root / "t-0")
    h.plain(b"p0")
    for round_ in range(4):  # interleaved transactions of A and B, both outcomes for each
        h.txn(A, b"a%d-1" % round_)
        h.txn(B, b"b%d-1" % round_)
        h.plain(b"p%d-1" % round_)
        h.txn(A, b"a%d-2" % round_)
        h.end(A, commit=round_ % 2 == 0)
        h.txn(B, b"b%d-2" % round_)
        h.end(B, commit=round_ % 2 == 1)
        h.plain(b"p%d-2" % round_)
    h.txn(A, b"open-1")  # A's transaction stays open: the LSO is here
    h.plain(b"after-open")
    h.txn(B, b"b-late")
    h.end(B, commit=True)
    h.txn(A, b"open-2")
    h.log.close()
    visible = {v for v in h.committed if h.values.index(v) < h.values.index(b"open-1")}
    return str(root), h, visible


def _values(rows: Any) -> list[bytes]:
    return [bytes(r["value"]) for r in rows]


def test_read_committed_and_uncommitted_from_partition_log_segments(spark, txn_dir):  # noqa: F811
    root, h, visible = txn_dir
    pdir = list_partitions(LocalFiles(root))[0]
    assert len(pdir.segments) >= 4  # the transactions span segments
    df = spark.read.format("minikafka").option("includeProducerFields", "true")
    uncommitted = df.option("isolationLevel", "read_uncommitted").load(root).orderBy("offset").collect()
    assert _values(uncommitted) == h.values  # everything but control records
    assert all(r["isTransactional"] == (r["producerId"] in (A, B)) for r in uncommitted)
    assert df.load(root).count() == len(h.values)  # read_uncommitted is the default
    # small slices: aborted transactions are cut across task boundaries
    committed = (df.option("isolationLevel", "read_committed").option("maxBytesPerPartition", "300")
                 .load(root).orderBy("offset").collect())
    assert _values(committed) == [v for v in h.values if v in visible]
    assert max(r["offset"] for r in committed) < h.lso
    assert {r["isTransactional"] for r in committed} == {True, False}


def test_aborted_transactions_from_headers_match_the_brokers_txnindex(txn_dir):
    root, h, _ = txn_dir
    files = LocalFiles(root)
    pdir = list_partitions(files)[0]
    from minikafka.spark_export.planner import partition_bounds

    state = transaction_state(files, pdir, partition_bounds(files, pdir)[1])
    assert state.last_stable_offset == h.lso
    indexed = []
    for seg in pdir.segments:
        path = Path(seg.log_path[: -len(".log")] + ".txnindex")
        data = path.read_bytes() if path.exists() else b""
        for pos in range(0, len(data) - len(data) % 34, 34):
            version, pid, first, last, _lso = struct.unpack_from(">hqqqq", data, pos)
            assert version == 0
            indexed.append(AbortedTxn(pid, first, last))
    assert indexed and sorted(state.aborted, key=lambda a: a.last_offset) == indexed


def test_isolation_level_option_is_checked_and_the_export_flag_applies_it(spark, txn_dir, tmp_path):  # noqa: F811
    root, h, visible = txn_dir
    with pytest.raises(ValueError, match="isolationLevel must be"):
        parse_options({"path": root, "isolationLevel": "committed"})
    slices = plan(parse_options({"path": root, "isolationLevel": "read_committed"}))
    assert max(s.end_offset for s in slices) == h.lso
    parser = argparse.ArgumentParser(prog="minikafka")
    add_parser(parser.add_subparsers(dest="command"))
    out = tmp_path / "committed.parquet"
    args = parser.parse_args(["export", "--data-dir", root, "--out", str(out), "--isolation-level", "read_committed",
                              "--no-progress"])
    assert run_export(args) == 0
    assert sorted(_values(spark.read.parquet(str(out)).collect())) == sorted(visible)


def test_streaming_read_committed_stops_at_the_open_transaction(spark, txn_dir):  # noqa: F811
    root, h, visible = txn_dir
    query = (spark.readStream.format("minikafka").option("startingOffsets", "earliest")
             .option("isolationLevel", "read_committed").option("maxOffsetsPerTrigger", "7").load(root)
             .select("offset", "value").writeStream.format("memory").queryName("committed_stream").start())
    try:
        query.processAllAvailable()
        rows = spark.table("committed_stream").orderBy("offset").collect()
        assert _values(rows) == [v for v in h.values if v in visible]
        assert len([p for p in query.recentProgress if p["numInputRows"] > 0]) > 2
    finally:
        query.stop()


def test_read_committed_returns_exactly_what_a_read_committed_consumer_sees(spark, tmp_path):  # noqa: F811
    from tests.transactions.test_transactions_read_clients import PARTITIONS, ConfluentReader, T, end_offset
    from tests.txn_clients import ConfluentTxn

    data_dir = tmp_path / "data"
    broker = BrokerThread(data_dir=str(data_dir), port=0, config={"log.segment.bytes": "2048"}).start()
    producers: list[Any] = []
    try:
        with RawClient(broker.bootstrap) as raw:
            create_topic(raw, T, partitions=PARTITIONS)
        from kafka import KafkaProducer

        plain = KafkaProducer(bootstrap_servers=broker.bootstrap, linger_ms=0)
        one, two = ConfluentTxn(broker.bootstrap, "spark-one"), ConfluentTxn(broker.bootstrap, "spark-two")
        producers += [one, two]
        for i in range(6):
            one.begin()
            two.begin()
            for p in range(PARTITIONS):
                one.send(T, p, b"one-%d-%d" % (i, p))
                two.send(T, p, b"two-%d-%d" % (i, p))
                plain.send(T, value=b"plain-%d-%d" % (i, p), partition=p).get(timeout=30)
            (one.abort if i % 3 == 1 else one.commit)()
            (two.abort if i % 2 else two.commit)()
        one.begin()  # left open: read_committed readers stop at it
        one.send(T, 0, b"open-0")
        plain.send(T, value=b"after-open", partition=0).get(timeout=30)
        plain.close(timeout=10)

        results = {}
        for isolation in ("read_committed", "read_uncommitted"):
            with RawClient(broker.bootstrap) as raw:
                ends = {p: end_offset(raw, p, isolation == "read_committed") for p in range(PARTITIONS)}
            reader = ConfluentReader(broker.bootstrap, isolation)
            try:
                consumed = reader.read_to(ends)
            finally:
                reader.close()
            rows = (spark.read.format("minikafka").option("subscribe", T).option("isolationLevel", isolation)
                    .load(str(data_dir)).orderBy("partition", "offset").collect())
            results[isolation] = [(r["partition"], bytes(r["value"])) for r in rows]
            assert results[isolation] == sorted(consumed, key=lambda pv: pv[0]), isolation
        assert (0, b"open-0") in results["read_uncommitted"] and (0, b"after-open") in results["read_uncommitted"]
        assert all(not v.startswith(b"open") and v != b"after-open" for _, v in results["read_committed"])
        assert any(v.startswith(b"one-1") for _, v in results["read_uncommitted"])  # aborted, yet there
        assert not any(v.startswith(b"one-1") for _, v in results["read_committed"])
    finally:
        for producer in producers:
            producer.close()
        broker.stop()
