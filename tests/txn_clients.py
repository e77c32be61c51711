"""The transactional producers of confluent-kafka, kafka-python and aiokafka behind one small
interface, so every transaction test runs against all three real clients."""

from __future__ import annotations

import asyncio
from typing import Any


class TxnProducer:
    """init/begin/send/send_offsets/commit/abort/close of one client's transactional producer."""

    name = ""

    def begin(self) -> None: ...
    def send(self, topic: str, partition: int, value: bytes) -> None: ...
    def send_offsets(self, offsets: dict[tuple[str, int], int], group: str) -> None: ...
    def commit(self) -> None: ...
    def abort(self) -> None: ...
    def close(self) -> None: ...


class ConfluentTxn(TxnProducer):
    name = "confluent"

    def __init__(self, bootstrap: str, txn_id: str, timeout_ms: int = 60000) -> None:
        from confluent_kafka import Producer

        self.p = Producer({"bootstrap.servers": bootstrap, "transactional.id": txn_id, "linger.ms": 0,
                           "transaction.timeout.ms": timeout_ms, "log_level": 2,
                           "message.timeout.ms": min(timeout_ms, 30000)})
        self.bootstrap = bootstrap
        self.p.init_transactions(30)
        self.errors: list[Any] = []

    def begin(self) -> None:
        self.p.begin_transaction()

    def send(self, topic: str, partition: int, value: bytes) -> None:
        self.p.produce(topic, value=value, partition=partition,
                       on_delivery=lambda err, msg: self.errors.append(err) if err else None)
        assert self.p.flush(30) == 0
        assert not self.errors, self.errors

    def send_offsets(self, offsets: dict[tuple[str, int], int], group: str) -> None:
        from confluent_kafka import Consumer, TopicPartition

        consumer = Consumer({"bootstrap.servers": self.bootstrap, "group.id": group, "log_level": 2})
        try:
            self.p.send_offsets_to_transaction([TopicPartition(t, p, o) for (t, p), o in offsets.items()],
                                               consumer.consumer_group_metadata(), 30)
        finally:
            consumer.close()

    def commit(self) -> None:
        self.p.commit_transaction(30)

    def abort(self) -> None:
        self.p.abort_transaction(30)

    def close(self) -> None:
        self.p.flush(0)


class KafkaPythonTxn(TxnProducer):
    name = "kafka-python"

    def __init__(self, bootstrap: str, txn_id: str, timeout_ms: int = 60000) -> None:
        from kafka import KafkaProducer

        self.p = KafkaProducer(bootstrap_servers=bootstrap, transactional_id=txn_id,
                               transaction_timeout_ms=timeout_ms, linger_ms=0)
        self.p.init_transactions()

    def begin(self) -> None:
        self.p.begin_transaction()

    def send(self, topic: str, partition: int, value: bytes) -> None:
        self.p.send(topic, value=value, partition=partition).get(timeout=30)

    def send_offsets(self, offsets: dict[tuple[str, int], int], group: str) -> None:
        from kafka import OffsetAndMetadata, TopicPartition

        self.p.send_offsets_to_transaction(
            {TopicPartition(t, p): OffsetAndMetadata(o, "", -1) for (t, p), o in offsets.items()}, group)

    def commit(self) -> None:
        self.p.commit_transaction()

    def abort(self) -> None:
        self.p.abort_transaction()

    def close(self) -> None:
        self.p.close(timeout=5)


class AioKafkaTxn(TxnProducer):
    name = "aiokafka"

    def __init__(self, bootstrap: str, txn_id: str, timeout_ms: int = 60000) -> None:
        from aiokafka import AIOKafkaProducer

        self.loop = asyncio.new_event_loop()

        async def make() -> Any:
            producer = AIOKafkaProducer(bootstrap_servers=bootstrap, transactional_id=txn_id,
                                        transaction_timeout_ms=timeout_ms, linger_ms=0)
            await producer.start()  # InitProducerId happens here
            return producer

        self.p = self._run(make())

    def _run(self, coro: Any) -> Any:
        return self.loop.run_until_complete(asyncio.wait_for(coro, 30))

    def begin(self) -> None:
        self._run(self.p.begin_transaction())

    def send(self, topic: str, partition: int, value: bytes) -> None:
        self._run(self.p.send_and_wait(topic, value=value, partition=partition))

    def send_offsets(self, offsets: dict[tuple[str, int], int], group: str) -> None:
        from aiokafka import TopicPartition

        self._run(self.p.send_offsets_to_transaction({TopicPartition(t, p): o for (t, p), o in offsets.items()},
                                                     group))

    def commit(self) -> None:
        self._run(self.p.commit_transaction())

    def abort(self) -> None:
        self._run(self.p.abort_transaction())

    def close(self) -> None:
        try:
            self._run(self.p.stop())
        finally:
            self.loop.close()


CLIENTS: dict[str, type[TxnProducer]] = {c.name: c for c in (ConfluentTxn, KafkaPythonTxn, AioKafkaTxn)}


def read_committed(client: str, bootstrap: str, topic: str, partitions: int) -> list[bytes]:
    """Every value a read_committed consumer of ``client`` gets from ``topic`` (from the start to
    the last stable offset of each partition), sorted."""
    if client == "confluent":
        from confluent_kafka import Consumer
        from confluent_kafka import TopicPartition as CTP

        consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "rc", "isolation.level": "read_committed",
                             "enable.partition.eof": True, "enable.auto.commit": False, "log_level": 2})
        consumer.assign([CTP(topic, p, 0) for p in range(partitions)])
        values, at_end = [], set()
        try:
            for _ in range(1000):
                msg = consumer.poll(1)
                if msg is None:
                    continue
                if msg.error():
                    at_end.add(msg.partition())
                    if len(at_end) == partitions:
                        break
                    continue
                values.append(msg.value())
            else:
                raise AssertionError("read_committed consumer never reached the end")
        finally:
            consumer.close()
        return sorted(values)
    if client == "kafka-python":
        from kafka import KafkaConsumer, TopicPartition

        consumer = KafkaConsumer(bootstrap_servers=bootstrap, isolation_level="read_committed",
                                 enable_auto_commit=False)
        tps = [TopicPartition(topic, p) for p in range(partitions)]
        consumer.assign(tps)
        consumer.seek_to_beginning()
        ends = consumer.end_offsets(tps)
        values = []
        try:
            for _ in range(1000):
                if all(consumer.position(tp) >= ends[tp] for tp in tps):
                    break
                for records in consumer.poll(timeout_ms=200).values():
                    values.extend(r.value for r in records)
            else:
                raise AssertionError("read_committed consumer never reached the end")
        finally:
            consumer.close()
        return sorted(values)

    async def aio() -> list[bytes]:
        from aiokafka import AIOKafkaConsumer, TopicPartition

        consumer = AIOKafkaConsumer(bootstrap_servers=bootstrap, isolation_level="read_committed",
                                    enable_auto_commit=False)
        await consumer.start()
        tps = [TopicPartition(topic, p) for p in range(partitions)]
        consumer.assign(tps)
        await consumer.seek_to_beginning()
        ends = await consumer.end_offsets(tps)
        values = []
        try:
            for _ in range(1000):
                if all([await consumer.position(tp) >= ends[tp] for tp in tps]):
                    break
                for records in (await consumer.getmany(timeout_ms=200)).values():
                    values.extend(r.value for r in records)
            else:
                raise AssertionError("read_committed consumer never reached the end")
        finally:
            await consumer.stop()
        return sorted(values)

    return asyncio.run(aio())
