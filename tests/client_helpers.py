"""Produce and consume with real Kafka clients, and check what came back."""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass
from typing import Any

BASE_TS = 1_700_000_000_000


@dataclass(frozen=True)
class Rec:
    partition: int
    offset: int
    key: bytes | None
    value: bytes | None
    headers: tuple[tuple[str, bytes], ...]
    timestamp: int


def make_records(n: int) -> list[tuple[bytes, bytes, list[tuple[str, bytes]], int]]:
    """n keyed records with headers and distinct timestamps: (key, value, headers, timestamp)."""
    return [
        (f"key-{i % 97}".encode(), f"value-{i}-".encode() * 3, [("seq", str(i).encode()), ("src", b"test")],
         BASE_TS + i)
        for i in range(n)
    ]


def check_consumed(sent: list[tuple[bytes, bytes, list[tuple[str, bytes]], int]], got: list[Rec]) -> None:
    """Every sent record exactly once, per-partition order kept, fields intact."""
    by_seq: dict[int, Rec] = {}
    for rec in got:
        seq = int(dict(rec.headers)["seq"])
        assert seq not in by_seq, f"record {seq} consumed twice"
        by_seq[seq] = rec
    assert len(by_seq) == len(sent), f"consumed {len(by_seq)} distinct records of {len(sent)}"
    for seq, (key, value, headers, ts) in enumerate(sent):
        rec = by_seq[seq]
        assert (rec.key, rec.value, list(rec.headers), rec.timestamp) == (key, value, headers, ts), seq
    per_partition: dict[int, list[Rec]] = {}
    for rec in got:
        per_partition.setdefault(rec.partition, []).append(rec)
    for part, recs in per_partition.items():
        recs.sort(key=lambda r: r.offset)
        seqs = [int(dict(r.headers)["seq"]) for r in recs]
        assert seqs == sorted(seqs), f"partition {part} out of order"
        # the same key always lands in the same partition
    keys_to_partition: dict[bytes | None, int] = {}
    for rec in got:
        assert keys_to_partition.setdefault(rec.key, rec.partition) == rec.partition


# ----------------------------------------------------------------------------- confluent-kafka


def confluent_produce(bootstrap: str, topic: str, records: list[Any], **config: Any) -> None:
    from confluent_kafka import Producer

    errors: list[Any] = []
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5, **config})
    for key, value, headers, ts in records:
        while True:
            try:
                producer.produce(topic, value=value, key=key, headers=headers, timestamp=ts,
                                 on_delivery=lambda err, msg: errors.append(err) if err else None)
                break
            except BufferError:
                producer.poll(0.05)
    remaining = producer.flush(60)
    assert remaining == 0, f"{remaining} records not delivered"
    assert not errors, errors[:3]


def confluent_consume(bootstrap: str, topic: str, partitions: int, expected: int, timeout: float = 60) -> list[Rec]:
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "unused", "enable.auto.commit": False,
                         "auto.offset.reset": "earliest"})
    consumer.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
    got: list[Rec] = []
    deadline = time.monotonic() + timeout
    try:
        while len(got) < expected and time.monotonic() < deadline:
            for msg in consumer.consume(num_messages=1000, timeout=0.5):
                assert msg.error() is None, msg.error()
                got.append(Rec(msg.partition(), msg.offset(), msg.key(), msg.value(),
                               tuple(msg.headers() or ()), msg.timestamp()[1]))
    finally:
        consumer.close()
    return got


# ----------------------------------------------------------------------------- kafka-python


def kafka_python_produce(bootstrap: str, topic: str, records: list[Any], **config: Any) -> None:
    from kafka import KafkaProducer

    producer = KafkaProducer(bootstrap_servers=bootstrap, **{"linger_ms": 5, **config})
    futures = [producer.send(topic, key=key, value=value, headers=headers, timestamp_ms=ts)
               for key, value, headers, ts in records]
    producer.flush(60)
    for fut in futures:
        fut.get(timeout=60)
    producer.close(timeout=10)


def kafka_python_consume(bootstrap: str, topic: str, partitions: int, expected: int,
                         timeout: float = 60) -> list[Rec]:
    from kafka import KafkaConsumer, TopicPartition

    consumer = KafkaConsumer(bootstrap_servers=bootstrap, group_id=None, enable_auto_commit=False,
                             auto_offset_reset="earliest")
    tps = [TopicPartition(topic, p) for p in range(partitions)]
    consumer.assign(tps)
    consumer.seek_to_beginning(*tps)
    got: list[Rec] = []
    deadline = time.monotonic() + timeout
    try:
        while len(got) < expected and time.monotonic() < deadline:
            for tp, msgs in consumer.poll(timeout_ms=500).items():
                for m in msgs:
                    got.append(Rec(tp.partition, m.offset, m.key, m.value, tuple(m.headers), m.timestamp))
    finally:
        consumer.close()
    return got


# ----------------------------------------------------------------------------- aiokafka


async def aiokafka_send(topic: str, records: list[Any], timeout: float, **settings: Any) -> None:
    """Sends ``records`` (key, value, headers, timestamp) through one AIOKafkaProducer made with
    ``settings`` and waits up to ``timeout`` seconds for every acknowledgement."""
    from aiokafka import AIOKafkaProducer

    producer = AIOKafkaProducer(**settings)
    await producer.start()
    try:
        futures = [await producer.send(topic, key=key, value=value, headers=headers, timestamp_ms=ts)
                   for key, value, headers, ts in records]
        await asyncio.wait_for(asyncio.gather(*futures), timeout)
    finally:
        await producer.stop()


async def aiokafka_read(topic: str, partitions: int, expected: int, timeout: float, **settings: Any) -> list[Rec]:
    """Reads every partition of ``topic`` from its start, outside any group, until ``expected`` records
    came or ``timeout`` seconds passed."""
    from aiokafka import AIOKafkaConsumer, TopicPartition

    consumer = AIOKafkaConsumer(**settings, group_id=None, enable_auto_commit=False, auto_offset_reset="earliest")
    await consumer.start()
    got: list[Rec] = []
    try:
        consumer.assign([TopicPartition(topic, p) for p in range(partitions)])
        await consumer.seek_to_beginning()
        deadline = time.monotonic() + timeout
        while len(got) < expected and time.monotonic() < deadline:
            batches = await consumer.getmany(timeout_ms=500)
            for tp, msgs in batches.items():
                for m in msgs:
                    got.append(Rec(tp.partition, m.offset, m.key, m.value, tuple(m.headers), m.timestamp))
    finally:
        await consumer.stop()
    return got


def aiokafka_produce(bootstrap: str, topic: str, records: list[Any], **config: Any) -> None:
    asyncio.run(aiokafka_send(topic, records, 60, bootstrap_servers=bootstrap, **{"linger_ms": 5, **config}))


def aiokafka_consume(bootstrap: str, topic: str, partitions: int, expected: int, timeout: float = 60) -> list[Rec]:
    return asyncio.run(aiokafka_read(topic, partitions, expected, timeout, bootstrap_servers=bootstrap))


CLIENTS = {
    "confluent-kafka": (confluent_produce, confluent_consume),
    "kafka-python": (kafka_python_produce, kafka_python_consume),
    "aiokafka": (aiokafka_produce, aiokafka_consume),
}


def producer_config(client: str, codec: str, idempotent: bool | None) -> dict[str, Any]:
    """Client-specific producer settings for a codec and idempotence choice (None = client default)."""
    if client == "confluent-kafka":
        config: dict[str, Any] = {"compression.type": codec}
        if idempotent is not None:
            config["enable.idempotence"] = idempotent
        return config
    config = {"compression_type": codec}
    if idempotent is not None:
        config["enable_idempotence"] = idempotent
    return config
