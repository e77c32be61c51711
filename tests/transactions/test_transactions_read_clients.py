"""read_committed with real consumers (confluent-kafka, kafka-python, aiokafka) against real
transactional producers of the same library: exactly the committed and plain records, in log
order, across many commits and aborts of two producers interleaved with a plain producer on two
partitions; a stop at an open transaction until it commits; read_uncommitted sees everything."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from kafka.protocol.consumer import ListOffsetsRequest

from minikafka.broker.embedded import BrokerThread
from minikafka.storage.checkpoints import RECOVERY_POINT_CHECKPOINT, read_offset_checkpoint
from minikafka.testkit import MiniKafka
from tests.broker.test_metrics import scrape
from tests.broker.test_metrics import value as metric
from tests.kafka_wire import RawClient, build_batch
from tests.scenario_helpers import create_topic, produce
from tests.storage.test_crash_recovery import BrokerProcess, _free_port
from tests.transactions.test_transactions_read import READ_COMMITTED, aborted, fetch, offsets_of
from tests.txn_clients import CLIENTS, ConfluentTxn, TxnProducer

T = "rc"
PARTITIONS = 2


def end_offset(client: RawClient, partition: int, read_committed: bool) -> int:
    """The readable end over the wire: the last stable offset, or the high watermark."""
    Request = ListOffsetsRequest[5]
    Topic = Request.ListOffsetsTopic
    request = Request(replica_id=-1, isolation_level=int(read_committed), topics=[Topic(name=T, partitions=[
        Topic.ListOffsetsPartition(partition_index=partition, current_leader_epoch=-1, timestamp=-1)])])
    return client.request(request).topics[0].partitions[0].offset


class Reader:
    """One live consumer of ``T`` from offset 0; :meth:`read_to` polls until it has reached the
    given end offset of every partition and returns what it delivered since the last call."""

    def poll_once(self) -> list[tuple[int, bytes]]: ...
    def reached(self, ends: dict[int, int]) -> bool: ...
    def close(self) -> None: ...

    def read_to(self, ends: dict[int, int]) -> list[tuple[int, bytes]]:
        got: list[tuple[int, bytes]] = []
        for _ in range(300):
            if self.reached(ends):
                return got
            got.extend(self.poll_once())
        raise AssertionError(f"the consumer never reached {ends}")


class ConfluentReader(Reader):
    def __init__(self, bootstrap: str, isolation: str) -> None:
        from confluent_kafka import Consumer, TopicPartition

        self.c = Consumer({"bootstrap.servers": bootstrap, "group.id": f"g-{uuid.uuid4().hex[:6]}",
                           "isolation.level": isolation, "enable.partition.eof": True,
                           "enable.auto.commit": False, "log_level": 2, "fetch.wait.max.ms": 50})
        self.c.assign([TopicPartition(T, p, 0) for p in range(PARTITIONS)])
        self.at: dict[int, int] = {}

    def poll_once(self) -> list[tuple[int, bytes]]:
        msg = self.c.poll(0.2)
        if msg is None:
            return []
        if msg.error():  # partition EOF: the consumer is at the readable end (the LSO when read_committed)
            self.at[msg.partition()] = msg.offset()
            return []
        self.at[msg.partition()] = msg.offset() + 1
        return [(msg.partition(), msg.value())]

    def reached(self, ends: dict[int, int]) -> bool:
        return all(self.at.get(p, 0) >= end for p, end in ends.items())

    def close(self) -> None:
        self.c.close()


class KafkaPythonReader(Reader):
    def __init__(self, bootstrap: str, isolation: str) -> None:
        from kafka import KafkaConsumer, TopicPartition

        self.c = KafkaConsumer(bootstrap_servers=bootstrap, isolation_level=isolation, enable_auto_commit=False,
                               fetch_max_wait_ms=50)
        self.tps = {p: TopicPartition(T, p) for p in range(PARTITIONS)}
        self.c.assign(list(self.tps.values()))
        self.c.seek_to_beginning()

    def poll_once(self) -> list[tuple[int, bytes]]:
        return [(tp.partition, r.value) for tp, records in self.c.poll(timeout_ms=200).items() for r in records]

    def reached(self, ends: dict[int, int]) -> bool:
        return all(self.c.position(self.tps[p]) >= end for p, end in ends.items())

    def close(self) -> None:
        self.c.close()


class AioKafkaReader(Reader):
    def __init__(self, bootstrap: str, isolation: str) -> None:
        from aiokafka import AIOKafkaConsumer, TopicPartition

        self.loop = asyncio.new_event_loop()
        self.tps = {p: TopicPartition(T, p) for p in range(PARTITIONS)}

        async def start() -> Any:
            consumer = AIOKafkaConsumer(bootstrap_servers=bootstrap, isolation_level=isolation,
                                        enable_auto_commit=False, fetch_max_wait_ms=50)
            await consumer.start()
            consumer.assign(list(self.tps.values()))
            await consumer.seek_to_beginning()
            return consumer

        self.c = self._run(start())

    def _run(self, coro: Any) -> Any:
        return self.loop.run_until_complete(asyncio.wait_for(coro, 30))

    def poll_once(self) -> list[tuple[int, bytes]]:
        batches = self._run(self.c.getmany(timeout_ms=200))
        return [(tp.partition, r.value) for tp, records in batches.items() for r in records]

    def reached(self, ends: dict[int, int]) -> bool:
        return all(self._run(self.c.position(self.tps[p])) >= end for p, end in ends.items())

    def close(self) -> None:
        try:
            self._run(self.c.stop())
        finally:
            self.loop.close()


READERS: dict[str, type[Reader]] = {"confluent": ConfluentReader, "kafka-python": KafkaPythonReader,
                                    "aiokafka": AioKafkaReader}


@pytest.fixture(params=list(CLIENTS))
def client(request: Any) -> str:
    return request.param


@pytest.fixture
def parts(client: str, broker: BrokerThread) -> Iterator[tuple[Callable[[], TxnProducer], Callable[[str], Reader]]]:
    """Factories for producers and readers of ``client``, all closed at the end."""
    made: list[Any] = []

    def producer() -> TxnProducer:
        made.append(CLIENTS[client](broker.bootstrap, f"x-{uuid.uuid4().hex[:8]}"))
        return made[-1]

    def reader(isolation: str) -> Reader:
        made.append(READERS[client](broker.bootstrap, isolation))
        return made[-1]

    with RawClient(broker.bootstrap) as raw:
        create_topic(raw, T, partitions=PARTITIONS)
    yield producer, reader
    for thing in reversed(made):
        try:
            thing.close()
        except Exception:
            pass  # closing is best effort; what matters was asserted


def ends(raw: RawClient, read_committed: bool) -> dict[int, int]:
    return {p: end_offset(raw, p, read_committed) for p in range(PARTITIONS)}


def by_partition(records: list[tuple[int, bytes]]) -> dict[int, list[bytes]]:
    out: dict[int, list[bytes]] = {p: [] for p in range(PARTITIONS)}
    for partition, value in records:
        out[partition].append(value)
    return out


def test_read_committed_sees_exactly_the_committed_and_plain_records_in_log_order(
        parts: tuple[Callable[[], TxnProducer], Callable[[str], Reader]], broker: BrokerThread) -> None:
    make_producer, make_reader = parts
    producers = {"a": make_producer(), "b": make_producer()}
    written: dict[int, list[bytes]] = {p: [] for p in range(PARTITIONS)}  # every data record, in log order
    visible: set[bytes] = set()  # plain records and those of committed transactions
    sent: dict[str, list[bytes]] = {"a": [], "b": []}  # by the transactions of this round

    def send(who: str, partition: int, value: bytes) -> None:
        producers[who].send(T, partition, value)
        written[partition].append(value)
        sent[who].append(value)

    with RawClient(broker.bootstrap) as raw:

        def plain(partition: int, value: bytes) -> None:
            assert produce(raw, T, build_batch(value=value), partition=partition).error_code == 0
            written[partition].append(value)
            visible.add(value)

        for r in range(6):
            sent["a"], sent["b"] = [], []
            producers["a"].begin()
            send("a", 0, b"a%d-0" % r)
            plain(0, b"p%d-0" % r)
            producers["b"].begin()
            send("b", 1, b"b%d-1" % r)
            send("a", 1, b"a%d-1" % r)
            plain(1, b"p%d-1" % r)
            send("b", 0, b"b%d-0" % r)
            send("a", 0, b"a%d-0b" % r)
            commits = {"a": r % 3 != 1, "b": r % 2 == 0}
            for who in ("b", "a") if r % 2 else ("a", "b"):
                if commits[who]:
                    producers[who].commit()
                    visible.update(sent[who])
                else:
                    producers[who].abort()
        final = ends(raw, True)
        assert final == ends(raw, False)  # every transaction is decided: the LSO is the high watermark
    expected = {p: [v for v in written[p] if v in visible] for p in range(PARTITIONS)}
    assert 0 < len(visible) < sum(map(len, written.values()))  # some of each
    reader = make_reader("read_committed")
    assert by_partition(reader.read_to(final)) == expected
    everything = make_reader("read_uncommitted")
    assert by_partition(everything.read_to(final)) == written


def test_read_committed_stops_at_an_open_transaction_until_it_commits(
        parts: tuple[Callable[[], TxnProducer], Callable[[str], Reader]], broker: BrokerThread) -> None:
    make_producer, make_reader = parts
    producer = make_producer()
    with RawClient(broker.bootstrap) as raw:
        assert produce(raw, T, build_batch(value=b"before")).error_code == 0
        producer.begin()
        producer.send(T, 0, b"open-1")
        assert produce(raw, T, build_batch(value=b"behind")).error_code == 0
        producer.send(T, 0, b"open-2")
        lso = ends(raw, True)
        assert lso == {0: 1, 1: 0}
        reader = make_reader("read_committed")
        assert by_partition(reader.read_to(lso))[0] == [b"before"]
        uncommitted = make_reader("read_uncommitted")
        assert by_partition(uncommitted.read_to(ends(raw, False)))[0] == [b"before", b"open-1", b"behind", b"open-2"]
        # nothing more arrives while the transaction stays open
        for _ in range(3):
            assert reader.poll_once() == []
        producer.commit()
        after = ends(raw, True)
        assert after == ends(raw, False) and after[0] == 5  # 4 records and the COMMIT marker
        assert by_partition(reader.read_to(after))[0] == [b"open-1", b"behind", b"open-2"]


def test_partition_state_and_metrics_show_the_open_transaction(minikafka_factory: Callable[..., MiniKafka]) -> None:
    kafka = minikafka_factory(admin_port=0)
    topic = kafka.new_topic()
    producer = ConfluentTxn(kafka.bootstrap, f"m-{uuid.uuid4().hex[:6]}")
    try:
        with RawClient(kafka.bootstrap) as raw:
            assert produce(raw, topic, build_batch(value=b"plain")).error_code == 0
            producer.begin()
            producer.send(topic, 0, b"open")
            assert produce(raw, topic, build_batch(value=b"behind")).error_code == 0
        state = kafka.partition_state(topic)
        assert (state["high_watermark"], state["last_stable_offset"]) == (3, 1)
        (txn,) = [p for p in state["producers"].values() if p["current_txn_first_offset"] >= 0]
        assert txn["current_txn_first_offset"] == 1
        assert metric(scrape(kafka), "minikafka_last_stable_offset_lag", topic=topic, partition="0") == 2
        producer.commit()
        state = kafka.partition_state(topic)
        assert state["last_stable_offset"] == state["high_watermark"] == 4
        assert all(p["current_txn_first_offset"] == -1 for p in state["producers"].values())
        assert metric(scrape(kafka), "minikafka_last_stable_offset_lag", topic=topic, partition="0") == 0
    finally:
        producer.close()


def _read_committed_views(raw: RawClient) -> dict[int, list[Any]]:
    """Per partition, what a read_committed Fetch of 1 byte answers at every offset up to the log end."""
    views: dict[int, list[Any]] = {}
    for p in range(PARTITIONS):
        hw = end_offset(raw, p, read_committed=False)
        views[p] = [(aborted(f), f.last_stable_offset, offsets_of(f))
                    for f in (fetch(raw, o, READ_COMMITTED, max_bytes=1, topic=T, partition=p) for o in range(hw + 1))]
    return views


def test_sigkill_keeps_what_read_committed_readers_get_and_rebuilds_lost_index_files(tmp_path: Path) -> None:
    proc = BrokerProcess(tmp_path / "data", _free_port())  # 64 KiB segments
    proc.start()
    bootstrap = f"127.0.0.1:{proc.port}"
    payload = b"x" * 2000
    try:
        with RawClient(bootstrap) as raw:
            create_topic(raw, T, partitions=PARTITIONS)
        writer = ConfluentTxn(bootstrap, "k-writer")
        holder = ConfluentTxn(bootstrap, "k-holder", timeout_ms=600_000)
        try:
            with RawClient(bootstrap) as raw:
                for r in range(40):
                    writer.begin()
                    for p in range(PARTITIONS):
                        writer.send(T, p, b"%d-%d-" % (r, p) + payload)
                        assert produce(raw, T, build_batch(value=b"plain-%d" % r), partition=p).error_code == 0
                    if r % 3 == 1:
                        writer.abort()
                    else:
                        writer.commit()
                holder.begin()
                holder.send(T, 0, b"held")  # stays open across the crash
                writer.begin()
                writer.send(T, 0, b"aborted-last")
                writer.send(T, 1, b"aborted-last")
                writer.abort()
                views = _read_committed_views(raw)
            reader = ConfluentReader(bootstrap, "read_committed")
            try:
                with RawClient(bootstrap) as raw:
                    before = by_partition(reader.read_to(ends(raw, True)))
            finally:
                reader.close()
        finally:
            writer.close()
            holder.close()
        data = proc.data_dir
        index_files = {p.relative_to(data): p.read_bytes() for p in data.glob(f"{T}-*/*.txnindex")}
        assert len({p.parent for p in index_files}) == PARTITIONS
        proc.kill()  # SIGKILL: no flush, no snapshot, no clean-shutdown marker
        # index files of segments past the recovery point were never fsynced: a crash may lose them
        recovery = read_offset_checkpoint(data / RECOVERY_POINT_CHECKPOINT)
        lost = [p for p in index_files if int(p.name[:20]) >= recovery.get((T, int(p.parent.name[-1])), 0)]
        assert lost
        for path in lost:
            (data / path).unlink()
        proc.start()
        with RawClient(bootstrap) as raw:
            assert _read_committed_views(raw) == views
            assert end_offset(raw, 0, True) < end_offset(raw, 0, False)  # the held transaction still holds
        assert {p.relative_to(data): p.read_bytes() for p in data.glob(f"{T}-*/*.txnindex")} == index_files
        reader = ConfluentReader(bootstrap, "read_committed")
        try:
            with RawClient(bootstrap) as raw:
                assert by_partition(reader.read_to(ends(raw, True))) == before
        finally:
            reader.close()
    finally:
        proc.stop()
