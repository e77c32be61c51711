"""Spark reads a data directory that minikafka wrote for real clients, and gets what a consumer gets.

confluent-kafka (librdkafka: raw snappy) and kafka-python (xerial-framed snappy, as the Java
producer writes it) produce with every codec, idempotently, with keys, null values and headers, to
a broker whose segments roll every 128 KiB; a LogAppendTime topic gets the broker's clock. A
kafka-python consumer reads everything back from the broker; the ``minikafka`` data source must
return the same records, field for field, from the files, while the broker runs and after it
stopped, and must handle a torn tail and a corrupt batch in a copy of that directory.
"""

from __future__ import annotations

import os
import random
import shutil
import struct
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from minikafka.broker.embedded import BrokerThread
from minikafka.spark_export.files import LocalFiles
from minikafka.spark_export.layout import list_partitions
from minikafka.spark_export.offsets import offset_for_timestamp
from tests.kafka_wire import RawClient
from tests.scenario_helpers import create_topic
from tests.spark.spark_helpers import project, spark, spark_rows  # noqa: F401

CODECS = ["none", "gzip", "snappy", "lz4", "zstd"]
N = 400
T0 = 1_700_000_000_000
COLS = ["topic", "partition", "offset", "key", "value", "timestamp_ms", "timestampType", "headers"]


def make_records(seed: str, n: int, with_null_header: bool) -> list[tuple[Any, ...]]:
    rng = random.Random(seed)
    out = []
    for i in range(n):
        key = None if i % 11 == 0 else f"k{rng.randint(0, 50)}".encode()
        value = None if i % 29 == 1 and key is not None else os.urandom(rng.choice([0, 30, 300, 2500]))
        headers = [("i", str(i).encode())]
        if i % 3 == 0:
            headers.append(("trace", os.urandom(6)))
        if with_null_header and i % 5 == 0:
            headers.append(("nothing", None))
        out.append((key, value, headers, T0 + i * 10 + rng.randint(0, 30)))
    return out


def confluent_produce(bootstrap: str, topic: str, codec: str, records: list[tuple[Any, ...]]) -> None:
    from confluent_kafka import Producer

    errors: list[Any] = []
    producer = Producer({"bootstrap.servers": bootstrap, "compression.type": codec, "enable.idempotence": True,
                         "linger.ms": 5, "batch.num.messages": 100, "batch.size": 32768})
    for i, (key, value, headers, ts) in enumerate(records):
        producer.produce(topic, value=value, key=key, headers=headers, timestamp=ts, partition=i % 2,
                         on_delivery=lambda err, msg: errors.append(err) if err else None)
        producer.poll(0)
    assert producer.flush(60) == 0
    assert not errors, errors[:3]


def kafka_python_produce(bootstrap: str, topic: str, codec: str, records: list[tuple[Any, ...]],
                         partitions: int = 2) -> None:
    from kafka import KafkaProducer

    producer = KafkaProducer(bootstrap_servers=bootstrap, compression_type=None if codec == "none" else codec,
                             enable_idempotence=True, linger_ms=5, batch_size=16384)
    futures = [producer.send(topic, key=key, value=value, headers=headers, timestamp_ms=ts, partition=i % partitions)
               for i, (key, value, headers, ts) in enumerate(records)]
    producer.flush(60)
    for fut in futures:
        fut.get(timeout=60)
    producer.close(timeout=10)


def consume_all(bootstrap: str, topics: list[str], timeout: float = 60) -> list[dict[str, Any]]:
    """Every record of ``topics`` as a kafka-python consumer reads it from the broker."""
    from kafka import KafkaConsumer, TopicPartition

    consumer = KafkaConsumer(bootstrap_servers=bootstrap, group_id=None, enable_auto_commit=False)
    tps = [TopicPartition(t, p) for t in topics for p in sorted(consumer.partitions_for_topic(t) or [])]
    consumer.assign(tps)
    consumer.seek_to_beginning(*tps)
    ends = consumer.end_offsets(tps)
    rows: list[dict[str, Any]] = []
    deadline = time.monotonic() + timeout
    try:
        while any(consumer.position(tp) < ends[tp] for tp in tps) and time.monotonic() < deadline:
            for tp, msgs in consumer.poll(timeout_ms=500).items():
                for m in msgs:
                    rows.append({"topic": tp.topic, "partition": tp.partition, "offset": m.offset, "key": m.key,
                                 "value": m.value, "timestamp_ms": m.timestamp, "timestampType": m.timestamp_type,
                                 "headers": [(k, v) for k, v in m.headers] or None})
    finally:
        consumer.close()
    rows.sort(key=lambda r: (r["topic"], r["partition"], r["offset"]))
    return rows


@pytest.fixture(scope="module")
def produced(tmp_path_factory) -> Any:
    data_dir = tmp_path_factory.mktemp("broker") / "data"
    broker = BrokerThread(data_dir=str(data_dir), port=0, config={"log.segment.bytes": "131072"}).start()
    topics = []
    with RawClient(broker.bootstrap) as raw:
        for codec in CODECS:
            for client in ("cf", "kp"):
                create_topic(raw, f"{client}-{codec}", partitions=2)
                topics.append(f"{client}-{codec}")
        create_topic(raw, "appended", partitions=1, configs={"message.timestamp.type": "LogAppendTime"})
    for codec in CODECS:
        confluent_produce(broker.bootstrap, f"cf-{codec}", codec, make_records("cf" + codec, N, True))
        kafka_python_produce(broker.bootstrap, f"kp-{codec}", codec, make_records("kp" + codec, N, False))
    kafka_python_produce(broker.bootstrap, "appended", "lz4", make_records("lat", 50, False), partitions=1)
    topics.append("appended")
    consumed = consume_all(broker.bootstrap, topics)
    yield broker, str(data_dir), consumed
    broker.stop()


def read(spark, data_dir: str, **options: str) -> list[dict[str, Any]]:  # noqa: F811
    reader = spark.read.format("minikafka").option("includeHeaders", "true")
    for k, v in options.items():
        reader = reader.option(k, v)
    return spark_rows(reader.load(data_dir))


def test_spark_returns_what_the_consumer_reads_for_every_client_and_codec(spark, produced):  # noqa: F811
    broker, data_dir, consumed = produced
    assert len(consumed) == 10 * N + 50
    got = read(spark, data_dir, includeProducerFields="true")
    assert project(got, COLS) == project(consumed, COLS)
    # segments rolled, so reads span several files per partition
    assert max(len(p.segments) for p in list_partitions(LocalFiles(data_dir))) >= 2
    # idempotent producers: one producer id per topic, sequence = position in the partition
    for topic in {r["topic"] for r in got if r["topic"] != "appended"}:
        rows = [r for r in got if r["topic"] == topic]
        assert len({r["producerId"] for r in rows}) == 1 and rows[0]["producerId"] >= 0
        for part in (0, 1):
            offsets = [r["offset"] for r in rows if r["partition"] == part]
            assert [r["sequence"] for r in rows if r["partition"] == part] == [o - offsets[0] for o in offsets]
    appended = [r for r in got if r["topic"] == "appended"]
    assert {r["timestampType"] for r in appended} == {1}
    assert all(abs(r["timestamp_ms"] - time.time() * 1000) < 600_000 for r in appended)


def test_starting_timestamp_agrees_with_the_brokers_offsets_for_times(spark, produced):  # noqa: F811
    from kafka import KafkaConsumer, TopicPartition

    broker, data_dir, consumed = produced
    target = T0 + (N // 2) * 10
    tps = [TopicPartition(f"cf-{c}", p) for c in ("gzip", "zstd") for p in (0, 1)]
    consumer = KafkaConsumer(bootstrap_servers=broker.bootstrap, group_id=None)
    try:
        answers = consumer.offsets_for_times({tp: target for tp in tps})
    finally:
        consumer.close()
    pdirs = {(p.topic, p.partition): p for p in list_partitions(LocalFiles(data_dir))}
    for tp in tps:
        rows = [r for r in consumed if (r["topic"], r["partition"]) == (tp.topic, tp.partition)]
        want = next(r["offset"] for r in rows if r["timestamp_ms"] >= target)
        assert offset_for_timestamp(LocalFiles(data_dir), pdirs[(tp.topic, tp.partition)], target, 0) == want
        assert answers[tp].offset == want
    got = read(spark, data_dir, subscribe="cf-gzip,cf-zstd", startingTimestamp=str(target))
    want_rows = [r for r in consumed if r["topic"] in ("cf-gzip", "cf-zstd") and r["timestamp_ms"] >= target]
    first = {(r["topic"], r["partition"]): r["offset"] for r in reversed(want_rows)}
    expected = [r for r in consumed if (r["topic"], r["partition"]) in first
                and r["offset"] >= first[(r["topic"], r["partition"])]]
    assert project(got, COLS) == project(expected, COLS)


def test_reading_while_clients_produce_returns_whole_batches_in_order(spark, produced):  # noqa: F811
    from confluent_kafka import Producer

    broker, data_dir, _ = produced
    with RawClient(broker.bootstrap) as raw:
        create_topic(raw, "live", partitions=2, configs={"segment.bytes": "262144"})
    stop = threading.Event()
    errors: list[Any] = []

    def produce() -> None:
        producer = Producer({"bootstrap.servers": broker.bootstrap, "compression.type": "zstd",
                             "enable.idempotence": True, "linger.ms": 2, "batch.size": 32768})
        i = 0
        while not stop.is_set() and i < 200_000:
            try:
                producer.produce("live", value=b"%08d" % i + os.urandom(100), partition=i % 2,
                                 on_delivery=lambda err, msg: errors.append(err) if err else None)
            except BufferError:
                producer.poll(0.05)
                continue
            i += 1
            if i % 100 == 0:  # about 5,000 records/s
                producer.poll(0)
                time.sleep(0.02)
        producer.flush(30)

    def written(partition: int) -> int:
        return broker.call(lambda: broker.broker.logs.get_log("live", partition).log_end_offset)

    thread = threading.Thread(target=produce)
    thread.start()
    try:
        deadline = time.monotonic() + 30  # read while the producer writes: once both partitions hold records
        while min(written(0), written(1)) < 1000:
            assert time.monotonic() < deadline and not errors, f"the producer is not writing: {errors[:3]}"
            time.sleep(0.05)
        sizes = []
        for _ in range(3):
            rows = read(spark, data_dir, subscribe="live")
            for part in (0, 1):
                values = [int(r["value"][:8]) for r in rows if r["partition"] == part]
                offsets = [r["offset"] for r in rows if r["partition"] == part]
                assert offsets == list(range(len(offsets)))
                assert values == [part + 2 * k for k in range(len(values))]
            sizes.append(len(rows))
    finally:
        stop.set()
        thread.join()
    assert not errors, errors[:3]
    assert sizes == sorted(sizes) and sizes[-1] > 0


def stopped_copy(produced: Any, dest: Path) -> str:
    broker, data_dir, _ = produced
    broker.stop()
    shutil.copytree(data_dir, dest)
    return str(dest)


def batch_spans(path: str) -> list[tuple[int, int, int, int]]:
    """(position, size, base offset, last offset) of every batch of a segment."""
    data = Path(path).read_bytes()
    out, pos = [], 0
    while pos + 61 <= len(data):
        base, length = struct.unpack_from(">qi", data, pos)
        (delta,) = struct.unpack_from(">i", data, pos + 23)
        out.append((pos, 12 + length, base, base + delta))
        pos += 12 + length
    return out


def test_after_shutdown_a_torn_tail_and_a_corrupt_batch_in_client_written_segments(spark, produced, tmp_path):  # noqa: F811
    _, _, consumed = produced
    root = stopped_copy(produced, tmp_path / "copy")
    kp = [r for r in consumed if r["topic"] in ("kp-snappy", "cf-snappy")]
    assert project(read(spark, root, subscribe="kp-snappy,cf-snappy"), COLS) == project(kp, COLS)

    # torn tail: the last batch of kp-snappy-0 loses its last 10 bytes
    pdir = next(p for p in list_partitions(LocalFiles(root)) if (p.topic, p.partition) == ("kp-snappy", 0))
    last_seg = pdir.segments[-1].log_path
    pos, size, base, last = batch_spans(last_seg)[-1]
    with open(last_seg, "r+b") as f:
        f.truncate(pos + size - 10)
    got = read(spark, root, subscribe="kp-snappy")
    want = [r for r in consumed if r["topic"] == "kp-snappy" and not (r["partition"] == 0 and r["offset"] >= base)]
    assert project(got, COLS) == project(want, COLS)

    # corrupt batch in the middle of cf-snappy-1's first segment
    pdir = next(p for p in list_partitions(LocalFiles(root)) if (p.topic, p.partition) == ("cf-snappy", 1))
    seg = pdir.segments[0].log_path
    spans = batch_spans(seg)
    pos, size, base, last = spans[len(spans) // 2]
    data = bytearray(Path(seg).read_bytes())
    data[pos + size - 5] ^= 0x01
    Path(seg).write_bytes(data)
    with pytest.raises(Exception, match="CRC mismatch"):
        read(spark, root, subscribe="cf-snappy")
    got = read(spark, root, subscribe="cf-snappy", failOnDataLoss="false")
    want = [r for r in consumed if r["topic"] == "cf-snappy" and not (r["partition"] == 1 and base <= r["offset"] <= last)]
    assert project(got, COLS) == project(want, COLS) and len(want) < N
