"""Compaction in a running broker: the background cleaner, real clients, metrics, a restart."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from kafka import KafkaConsumer, KafkaProducer, TopicPartition

from minikafka.storage.batch import split_batches
from minikafka.testkit import MiniKafka
from tests.broker.test_fetch import fetch
from tests.broker.test_metrics import scrape, value
from tests.kafka_wire import RawClient, build_batch
from tests.scenario_helpers import create_topic, produce

CONFIG = {"log.cleaner.backoff.ms": "50"}
TOPIC_CONFIGS = {"cleanup.policy": "compact", "segment.bytes": "4000", "min.cleanable.dirty.ratio": "0.01",
                 "delete.retention.ms": "0"}


def wait_for(condition: Callable[[], bool], seconds: float = 30) -> None:
    deadline = time.monotonic() + seconds
    while not condition():
        assert time.monotonic() < deadline, "condition not reached in time"
        time.sleep(0.05)


def consume_all(bootstrap: str, topic: str, end: int) -> list[tuple[int, bytes, bytes | None]]:
    consumer = KafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False, auto_offset_reset="earliest",
                             consumer_timeout_ms=5000)
    tp = TopicPartition(topic, 0)
    consumer.assign([tp])
    consumer.seek_to_beginning(tp)
    out = []
    deadline = time.monotonic() + 30
    while consumer.position(tp) < end and time.monotonic() < deadline:
        for records in consumer.poll(timeout_ms=500).values():
            out.extend((r.offset, r.key, r.value) for r in records)
    consumer.close()
    return out


def test_background_cleaner_compacts_and_clients_read_the_latest_values(
        minikafka_factory: Callable[..., MiniKafka]) -> None:
    kafka = minikafka_factory(admin_port=0, config=CONFIG)
    with RawClient(kafka.bootstrap) as c:
        create_topic(c, "compacted", configs=TOPIC_CONFIGS)
        latest: dict[bytes, tuple[int, bytes]] = {}
        for r in range(10):
            for k in range(20):
                key, val = f"key-{k}".encode(), f"round-{r}-{k}".encode() * 4
                offset = produce(c, "compacted", build_batch(key=key, value=val)).base_offset
                latest[key] = (offset, val)
        end = 200
    # the cleaner may already have run while the records were produced: wait for most to go
    wait_for(lambda: value(scrape(kafka), "minikafka_log_cleaner_records_removed_total") > 100)
    families = scrape(kafka)
    assert value(families, "minikafka_log_cleaner_read_bytes_total") > 0
    assert value(families, "minikafka_log_cleaner_last_run_timestamp_seconds") > 0
    got = consume_all(kafka.bootstrap, "compacted", end)
    by_key = {k: (o, v) for o, k, v in got}
    # every key's latest value, at its original offset, unless it sits in the active segment
    for key, (offset, val) in latest.items():
        assert by_key[key] == (offset, val)
    assert len(got) < 200
    with RawClient(kafka.bootstrap) as c:  # a consumer positioned in a removed range moves on
        part = fetch(c, 1, topic="compacted")
        assert part.error_code == 0
        assert split_batches(part.records)[0][1].base_offset > 1


def test_compaction_survives_a_restart_with_the_cleaner_checkpoint(
        minikafka_factory: Callable[..., MiniKafka]) -> None:
    kafka = minikafka_factory(admin_port=0, config=CONFIG)
    with RawClient(kafka.bootstrap) as c:
        create_topic(c, "cp", configs=TOPIC_CONFIGS)
        for r in range(6):
            for k in range(20):
                assert produce(c, "cp", build_batch(key=f"k{k}".encode(), value=b"v%d" % r * 30)).error_code == 0
    wait_for(lambda: value(scrape(kafka), "minikafka_log_cleaner_read_bytes_total") > 0)
    wait_for(lambda: (kafka.data_dir / "cleaner-offset-checkpoint").exists())
    before = consume_all(kafka.bootstrap, "cp", 120)
    kafka.restart(clean=False)
    assert consume_all(kafka.bootstrap, "cp", 120) == before
    lines = (kafka.data_dir / "cleaner-offset-checkpoint").read_text().splitlines()
    assert lines[0] == "0" and any(line.startswith("cp 0 ") for line in lines[2:])


def test_a_restart_replays_the_compacted_offsets_log_not_everything_written(
        minikafka_factory: Callable[..., MiniKafka], monkeypatch: pytest.MonkeyPatch,
        caplog: pytest.LogCaptureFixture) -> None:
    """__consumer_offsets is cleaned by the log cleaner (the store's own compaction is held back
    here): a restart replays about one record per live key plus the active segment."""
    from minikafka.broker.groups import offset_store
    from tests.groups.test_groups_protocol import commit
    from tests.groups.test_groups_protocol import fetch as fetch_offsets

    monkeypatch.setattr(offset_store, "COMPACT_MIN_RECORDS", 10**9)
    kafka = minikafka_factory(admin_port=0, config=CONFIG | {"offsets.topic.segment.bytes": "20000"})
    written = 3000
    with RawClient(kafka.bootstrap) as c:
        create_topic(c, "t", partitions=4)
        for i in range(written):
            commit(c, f"g{i % 5}", {("t", i % 4): (i, "m")})
    wait_for(lambda: value(scrape(kafka), "minikafka_log_cleaner_records_removed_total") > written * 0.8)
    caplog.clear()
    with caplog.at_level(logging.INFO, logger="minikafka"):
        kafka.restart(clean=False)
    loaded = [r.getMessage() for r in caplog.records if "offset(s) of" in r.getMessage()]
    replayed = int(loaded[-1].split(" from ")[1].split(" record")[0])
    assert replayed < 400, loaded[-1]  # 20 live keys, the uncleaned active segment, not 3000
    with RawClient(kafka.bootstrap) as c:
        error, offsets = fetch_offsets(c, "g0", None)
        assert error == 0
        last = {p: max(i for i in range(written) if i % 5 == 0 and i % 4 == p) for p in range(4)}
        assert {p: offsets[("t", p)][0] for p in range(4)} == last


def control_batches_on_disk(directory: Path) -> int | None:
    """Control batches in a partition's segment files (None while a swap renames them)."""
    try:
        return sum(1 for path in sorted(directory.glob("*.log"))
                   for _pos, h in split_batches(path.read_bytes()) if h.is_control)
    except (FileNotFoundError, ValueError):
        return None


def test_read_committed_consumer_gets_exactly_the_committed_records_once_markers_are_cleaned(
        minikafka_factory: Callable[..., MiniKafka]) -> None:
    """confluent-kafka's transactional producer commits and aborts on a compacted topic; the
    background cleaner removes the aborted records and then the markers nothing needs; a
    read_committed confluent-kafka consumer reads the latest committed value of each key and no
    aborted one, before and after a restart."""
    from confluent_kafka import Consumer, Producer
    from confluent_kafka import TopicPartition as ConfluentTopicPartition

    kafka = minikafka_factory(admin_port=0, config=CONFIG)
    with RawClient(kafka.bootstrap) as c:
        create_topic(c, "txc", configs=TOPIC_CONFIGS | {"segment.bytes": "1500"})
    producer = Producer({"bootstrap.servers": kafka.bootstrap, "transactional.id": "cleaned-txns", "linger.ms": 0,
                         "log_level": 2})
    producer.init_transactions(30)
    expected: dict[bytes, bytes] = {}
    for t in range(8):
        producer.begin_transaction()
        batch = {f"t{t % 4}-{k}".encode(): f"txn{t}-{k}".encode() * 8 for k in range(3)}
        for key, val in batch.items():
            producer.produce("txc", key=key, value=val, partition=0)
        assert producer.flush(30) == 0
        if t % 3 == 1:
            producer.abort_transaction(30)
        else:
            producer.commit_transaction(30)
            expected.update(batch)
    partition_dir = kafka.data_dir / "txc-0"
    markers_written = 8  # one per transaction (the cleaner may already be removing some)
    plain = Producer({"bootstrap.servers": kafka.bootstrap, "linger.ms": 0, "log_level": 2})

    def tick() -> bool:  # plain writes roll segments and give the cleaner dirty data to clean
        for i in range(10):
            plain.produce("txc", key=b"tick-%d" % i, value=b"t" * 120, partition=0)
        assert plain.flush(30) == 0
        count = control_batches_on_disk(partition_dir)
        return count is not None and count < markers_written - 2

    wait_for(tick, 60)

    def read_committed() -> dict[bytes, bytes]:
        consumer = Consumer({"bootstrap.servers": kafka.bootstrap, "group.id": "rc", "isolation.level": "read_committed",
                             "enable.auto.commit": False, "log_level": 2})
        tp = ConfluentTopicPartition("txc", 0, 0)
        consumer.assign([tp])
        _low, high = consumer.get_watermark_offsets(tp, timeout=10)
        got: dict[bytes, bytes] = {}
        deadline = time.monotonic() + 30
        position = 0
        while position < high and time.monotonic() < deadline:
            msg = consumer.poll(0.5)
            if msg is None:
                position = consumer.position([tp])[0].offset
                continue
            assert msg.error() is None, msg.error()
            got[msg.key()] = msg.value()
            position = msg.offset() + 1
        consumer.close()
        assert position >= high
        return {k: v for k, v in got.items() if not k.startswith(b"tick-")}

    assert read_committed() == expected
    kafka.restart(clean=False)
    assert read_committed() == expected


# ----------------------------------------------------------------------------- cleaning on demand
def produce_keyed(bootstrap: str, topic: str, records: list[tuple[bytes, bytes | None]]) -> None:
    producer = KafkaProducer(bootstrap_servers=bootstrap, linger_ms=0)
    for key, val in records:
        producer.send(topic, key=key, value=val).get(timeout=10)
    producer.close()


def test_clean_logs_compacts_now_and_a_consumer_reads_the_latest_value_of_each_key(
        minikafka_factory: Callable[..., MiniKafka]) -> None:
    kafka = minikafka_factory()  # the background cleaner looks every 15 s: the test's calls do the cleaning
    kafka.create_topic("latest", 1, {"cleanup.policy": "compact", "min.cleanable.dirty.ratio": "0.01"})
    kafka.create_topic("plain", 1)
    writes = [(f"key-{i % 4}".encode(), f"v{i}".encode()) for i in range(12)] + [(b"key-0", None)]
    produce_keyed(kafka.bootstrap, "latest", writes)
    produce_keyed(kafka.bootstrap, "plain", writes)

    assert kafka.clean_logs() == {"rolled": [], "cleaned": []}  # everything is in the active segment
    assert len(kafka.records("latest")) == 13

    done = kafka.clean_logs(roll=True, topic="latest")
    assert done["rolled"] == ["latest-0"]
    [cleaned] = done["cleaned"]
    assert (cleaned["topic"], cleaned["partition"], cleaned["records_removed"], cleaned["clean_up_to"]) == \
        ("latest", 0, 9, 13)
    assert cleaned["bytes_written"] < cleaned["bytes_read"]
    # the latest record of each key, at its own offset; key-0's is the tombstone
    expected = [(9, b"key-1", b"v9"), (10, b"key-2", b"v10"), (11, b"key-3", b"v11"), (12, b"key-0", None)]
    assert consume_all(kafka.bootstrap, "latest", 13) == expected
    assert [(r.offset, r.key, r.value) for r in kafka.records("latest")] == expected
    state = kafka.partition_state("latest")
    assert (state["log_start_offset"], state["log_end_offset"]) == (0, 13)
    assert len(kafka.records("plain")) == 13  # not compacted: left alone
    assert kafka.clean_logs() == {"rolled": [], "cleaned": []}  # nothing qualifies any more


def test_clean_logs_refuses_what_it_cannot_do(minikafka_factory: Callable[..., MiniKafka]) -> None:
    off = minikafka_factory(config={"log.cleaner.enable": "false"})
    with pytest.raises(RuntimeError, match=r"log\.cleaner\.enable=false"):
        off.clean_logs(roll=True)
    kafka = minikafka_factory()
    kafka.create_topic("t", 1, {"cleanup.policy": "compact"})
    with pytest.raises(ValueError, match="with roll"):
        kafka.clean_logs(topic="t")
    with pytest.raises(KeyError, match="nope"):
        kafka.clean_logs(roll=True, topic="nope")


def test_clean_logs_and_the_background_cleaner_take_turns(minikafka_factory: Callable[..., MiniKafka]) -> None:
    # the background duty looks every 10 ms while the test cleans on demand: never two cleanings of
    # one log at once, and the end state is the same
    kafka = minikafka_factory(config={"log.cleaner.backoff.ms": "10"})
    kafka.create_topic("busy", 1, {**TOPIC_CONFIGS, "segment.bytes": "300"})
    latest: dict[bytes, bytes] = {}
    for round_ in range(6):
        writes = [(f"key-{k}".encode(), f"r{round_}-{k}".encode()) for k in range(8)]
        produce_keyed(kafka.bootstrap, "busy", writes)
        latest.update(writes)
        kafka.clean_logs(roll=True, topic="busy")
    kafka.clean_logs(roll=True, topic="busy")
    records = kafka.records("busy")
    assert {r.key: r.value for r in records} == latest
    assert len(records) == len(latest)
