"""Produce and consume with real Kafka clients, and check what came back."""

from __future__ import annotations

import asyncio
import threading
import time
from concurrent.futures import Future
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


# ----------------------------------------------------------------------------- one interface over both Python clients
#
# Failover tests drive kafka-python and aiokafka through the same few calls, so one test body serves both:
# a send returns a handle at once (the record may be in flight while the test crashes a broker), and
# ``outcomes`` waits for the handles: each becomes the offset the broker acknowledged, or the exception
# the client surfaced for it.


class LoopThread:
    """An asyncio event loop on a thread of its own, so sync test code can drive aiokafka (one loop
    may serve several clients)."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self.loop.run_forever, name="aiokafka-loop", daemon=True)
        self._thread.start()

    def run(self, coro: Any, timeout: float = 60) -> Any:
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(timeout)

    def stop(self) -> None:
        self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join(10)
        self.loop.close()


def kafka_python_read_to_end(bootstrap: str, topic: str, partitions: int, timeout: float = 60,
                             **config: Any) -> list[Rec]:
    """Every record of ``topic`` from the start of each partition to its end as kafka-python sees
    the end (the high watermark, or the last stable offset with read_committed)."""
    from kafka import KafkaConsumer, TopicPartition

    consumer = KafkaConsumer(bootstrap_servers=bootstrap, group_id=None, enable_auto_commit=False,
                             auto_offset_reset="earliest", **config)
    tps = [TopicPartition(topic, p) for p in range(partitions)]
    try:
        consumer.assign(tps)
        consumer.seek_to_beginning(*tps)
        ends = consumer.end_offsets(tps)
        got: list[Rec] = []
        deadline = time.monotonic() + timeout
        while any(consumer.position(tp) < ends[tp] for tp in tps):
            assert time.monotonic() < deadline, f"{topic} not read to its end {ends}: {len(got)} records"
            for tp, msgs in consumer.poll(timeout_ms=200).items():
                got += [Rec(tp.partition, m.offset, m.key, m.value, tuple(m.headers), m.timestamp) for m in msgs]
        return got
    finally:
        consumer.close()


class KafkaPythonClient:
    """kafka-python's producer and consumer behind the failover tests' interface."""

    name = "kafka-python"

    def __init__(self, bootstrap: str, **producer_config: Any) -> None:
        from kafka import KafkaProducer

        self.bootstrap = bootstrap
        self.producer = KafkaProducer(bootstrap_servers=bootstrap, **{"linger_ms": 5, **producer_config})

    def send(self, topic: str, value: bytes, partition: int | None = None) -> Any:
        return self.producer.send(topic, value=value, partition=partition)

    def outcomes(self, handles: list[Any], timeout: float = 60) -> list[Any]:
        deadline = time.monotonic() + timeout
        results: list[Any] = []
        for handle in handles:
            try:
                results.append(handle.get(timeout=max(deadline - time.monotonic(), 0.1)).offset)
            except Exception as exc:  # noqa: BLE001 - the client's error for this record is the result
                results.append(exc)
        return results

    def init_transactions(self) -> None:
        self.producer.init_transactions()

    def begin_transaction(self) -> None:
        self.producer.begin_transaction()

    def commit_transaction(self) -> None:
        self.producer.commit_transaction()

    def abort_transaction(self) -> None:
        self.producer.abort_transaction()

    def read_to_end(self, topic: str, partitions: int, timeout: float = 60, **config: Any) -> list[Rec]:
        return kafka_python_read_to_end(self.bootstrap, topic, partitions, timeout, **config)

    def close(self) -> None:
        self.producer.close(timeout=10)


class AiokafkaClient:
    """aiokafka's producer and consumer behind the failover tests' interface, on a :class:`LoopThread`."""

    name = "aiokafka"

    def __init__(self, bootstrap: str, **producer_config: Any) -> None:
        from aiokafka import AIOKafkaProducer

        self.bootstrap = bootstrap
        self.loop = LoopThread()

        async def make() -> Any:
            producer = AIOKafkaProducer(bootstrap_servers=bootstrap, **{"linger_ms": 5, **producer_config})
            await producer.start()
            return producer

        self.producer = self.loop.run(make())

    def send(self, topic: str, value: bytes, partition: int | None = None) -> Any:
        return self.loop.run(self.producer.send(topic, value=value, partition=partition))

    def outcomes(self, handles: list[Any], timeout: float = 60) -> list[Any]:
        async def gather() -> list[Any]:
            done = await asyncio.wait_for(asyncio.gather(*handles, return_exceptions=True), timeout)
            return [r if isinstance(r, BaseException) else r.offset for r in done]

        return list(self.loop.run(gather(), timeout + 5))

    def init_transactions(self) -> None:
        """aiokafka gets its producer id when it starts."""

    def begin_transaction(self) -> None:
        self.loop.run(self.producer.begin_transaction())

    def commit_transaction(self) -> None:
        self.loop.run(self.producer.commit_transaction())

    def abort_transaction(self) -> None:
        self.loop.run(self.producer.abort_transaction())

    def read_to_end(self, topic: str, partitions: int, timeout: float = 60, **config: Any) -> list[Rec]:
        """As :meth:`KafkaPythonClient.read_to_end`."""
        return list(self.loop.run(self._read_to_end(topic, partitions, timeout, **config), timeout + 10))

    async def _read_to_end(self, topic: str, partitions: int, timeout: float, **config: Any) -> list[Rec]:
        from aiokafka import AIOKafkaConsumer, TopicPartition

        consumer = AIOKafkaConsumer(bootstrap_servers=self.bootstrap, group_id=None, enable_auto_commit=False,
                                    auto_offset_reset="earliest", **config)
        await consumer.start()
        tps = [TopicPartition(topic, p) for p in range(partitions)]
        try:
            consumer.assign(tps)
            await consumer.seek_to_beginning()
            ends = await consumer.end_offsets(tps)
            got: list[Rec] = []
            deadline = time.monotonic() + timeout
            while any([await consumer.position(tp) < ends[tp] for tp in tps]):
                assert time.monotonic() < deadline, f"{topic} not read to its end {ends}: {len(got)} records"
                for tp, msgs in (await consumer.getmany(timeout_ms=200)).items():
                    got += [Rec(tp.partition, m.offset, m.key, m.value, tuple(m.headers), m.timestamp) for m in msgs]
            return got
        finally:
            await consumer.stop()

    def close(self) -> None:
        try:
            self.loop.run(self.producer.stop(), 20)
        finally:
            self.loop.stop()


class ConfluentClient:
    """confluent-kafka behind the same interface; settings by kafka-python's names
    (``transactional_id``) become librdkafka's (``transactional.id``)."""

    name = "confluent-kafka"

    def __init__(self, bootstrap: str, **producer_config: Any) -> None:
        from confluent_kafka import Producer

        self.bootstrap = bootstrap
        self.producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5,
                                  **{k.replace("_", "."): v for k, v in producer_config.items()}})

    def send(self, topic: str, value: bytes, partition: int | None = None) -> Future[int]:
        from confluent_kafka import KafkaException

        handle: Future[int] = Future()

        def delivered(err: Any, msg: Any) -> None:
            if err:
                handle.set_exception(KafkaException(err))
            else:
                handle.set_result(msg.offset())

        self.producer.produce(topic, value=value, on_delivery=delivered,
                              **({} if partition is None else {"partition": partition}))
        self.producer.poll(0)
        return handle

    def outcomes(self, handles: list[Future[int]], timeout: float = 60) -> list[Any]:
        self.producer.flush(timeout)
        return [h.exception() or h.result() if h.done() else TimeoutError("not delivered") for h in handles]

    def init_transactions(self) -> None:
        self.producer.init_transactions(30)

    def begin_transaction(self) -> None:
        self.producer.begin_transaction()

    def commit_transaction(self) -> None:
        self.producer.commit_transaction(30)

    def abort_transaction(self) -> None:
        self.producer.abort_transaction(30)

    def read_to_end(self, topic: str, partitions: int, timeout: float = 60, **config: Any) -> list[Rec]:
        """As :func:`kafka_python_read_to_end` (librdkafka reads committed records only unless told)."""
        from confluent_kafka import Consumer, KafkaError, TopicPartition

        consumer = Consumer({"bootstrap.servers": self.bootstrap, "group.id": "unused", "enable.auto.commit": False,
                             "enable.partition.eof": True, "isolation.level": "read_uncommitted",  # as the others
                             **{k.replace("_", "."): v for k, v in config.items()}})
        consumer.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
        got: list[Rec] = []
        ended: set[int] = set()
        deadline = time.monotonic() + timeout
        try:
            while len(ended) < partitions:
                assert time.monotonic() < deadline, f"{topic} not read to its end: {len(got)} records"
                msg = consumer.poll(0.2)
                if msg is None:
                    continue
                if msg.error():
                    assert msg.error().code() == KafkaError._PARTITION_EOF, msg.error()
                    ended.add(msg.partition())
                else:
                    ended.discard(msg.partition())
                    got.append(Rec(msg.partition(), msg.offset(), msg.key(), msg.value(),
                                   tuple(msg.headers() or ()), msg.timestamp()[1]))
            return got
        finally:
            consumer.close()

    def close(self) -> None:
        self.producer.flush(10)


PYTHON_CLIENTS = {"kafka-python": KafkaPythonClient, "aiokafka": AiokafkaClient}
ALL_CLIENTS = {**PYTHON_CLIENTS, "confluent-kafka": ConfluentClient}


# ----------------------------------------------------------------------------- consumers that stay positioned
#
# A truncation test positions a consumer of each client on a partition, changes the log under it,
# and then sees what the consumer does next: each reader keeps its consumer open between reads.


class ConfluentReader:
    """A confluent-kafka consumer assigned one partition from offset 0, outside any group."""

    def __init__(self, bootstrap: str, topic: str, **config: Any) -> None:
        from confluent_kafka import Consumer, TopicPartition

        self.consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "unused", "enable.auto.commit": False,
                                  **config})
        self.consumer.assign([TopicPartition(topic, 0, 0)])
        self.errors: list[Any] = []

    def read(self, count: int, timeout: float = 30) -> list[tuple[int, bytes]]:
        """The next ``count`` records as (offset, value), read until then, an error (kept in
        ``errors``) or ``timeout`` seconds."""
        got: list[tuple[int, bytes]] = []
        deadline = time.monotonic() + timeout
        while len(got) < count and not self.errors and time.monotonic() < deadline:
            msg = self.consumer.poll(0.2)
            if msg is None:
                continue
            if msg.error():
                self.errors.append(msg.error())
            else:
                got.append((msg.offset(), msg.value()))
        return got

    def close(self) -> None:
        self.consumer.close()


class KafkaPythonReader:
    """As :class:`ConfluentReader`, with kafka-python."""

    def __init__(self, bootstrap: str, topic: str, **config: Any) -> None:
        from kafka import KafkaConsumer, TopicPartition

        self.consumer = KafkaConsumer(bootstrap_servers=bootstrap, group_id=None, enable_auto_commit=False, **config)
        self.consumer.assign([TopicPartition(topic, 0)])
        self.consumer.seek(TopicPartition(topic, 0), 0)
        self.errors: list[Any] = []

    def read(self, count: int, timeout: float = 30) -> list[tuple[int, bytes]]:
        got: list[tuple[int, bytes]] = []
        deadline = time.monotonic() + timeout
        while len(got) < count and not self.errors and time.monotonic() < deadline:
            try:
                batches = self.consumer.poll(timeout_ms=200)
            except Exception as exc:  # noqa: BLE001 - what the client raises is what the test checks
                self.errors.append(exc)
                continue
            got += [(m.offset, m.value) for msgs in batches.values() for m in msgs]
        return got

    def close(self) -> None:
        self.consumer.close()


class AiokafkaReader:
    """As :class:`ConfluentReader`, with aiokafka on a :class:`LoopThread`."""

    def __init__(self, bootstrap: str, topic: str, **config: Any) -> None:
        from aiokafka import AIOKafkaConsumer, TopicPartition

        self.loop = LoopThread()
        self.errors: list[Any] = []

        async def make() -> Any:
            consumer = AIOKafkaConsumer(bootstrap_servers=bootstrap, group_id=None, enable_auto_commit=False,
                                        **config)
            await consumer.start()
            consumer.assign([TopicPartition(topic, 0)])
            consumer.seek(TopicPartition(topic, 0), 0)
            return consumer

        self.consumer = self.loop.run(make())

    def read(self, count: int, timeout: float = 30) -> list[tuple[int, bytes]]:
        async def read() -> list[tuple[int, bytes]]:
            got: list[tuple[int, bytes]] = []
            deadline = time.monotonic() + timeout
            while len(got) < count and not self.errors and time.monotonic() < deadline:
                try:
                    batches = await self.consumer.getmany(timeout_ms=200)
                except Exception as exc:  # noqa: BLE001 - as in KafkaPythonReader.read
                    self.errors.append(exc)
                    continue
                got += [(m.offset, m.value) for msgs in batches.values() for m in msgs]
            return got

        return list(self.loop.run(read(), timeout + 10))

    def close(self) -> None:
        try:
            self.loop.run(self.consumer.stop(), 20)
        finally:
            self.loop.stop()
