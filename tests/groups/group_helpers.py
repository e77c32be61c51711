"""Group consumers of confluent-kafka, kafka-python and aiokafka behind one small interface.

Each member subscribes to one topic in a group, returns what it polled and commits exactly what
it returned (the next offset of each partition) synchronously, so a test knows what the group
has committed. Timeouts are short so that rebalances take well under a second: the broker runs
with ``group.initial.rebalance.delay.ms=0`` and ``group.min.session.timeout.ms=1000``.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from tests.client_helpers import LoopThread

SESSION_MS = 6000
HEARTBEAT_MS = 100
#: max.poll.interval.ms is the rebalance timeout: a bound on how long a rebalance may wait
POLL_INTERVAL_MS = 15000

#: A short initial rebalance delay (Kafka's default is 3 s) lets the members that start together land in
#: one generation, after they have loaded the topic metadata (a kafka-python leader that assigns before
#: it knows the topic's partitions rejoins at once).
GROUP_BROKER_CONFIG = {"group.initial.rebalance.delay.ms": "300", "group.min.session.timeout.ms": "1000"}


@dataclass(frozen=True)
class Got:
    member: str
    partition: int
    offset: int
    value: bytes


class Member:
    """A group consumer (see the module docstring)."""

    name: str

    def poll(self, timeout: float = 0.05) -> list[Got]:
        raise NotImplementedError

    def assignment(self) -> set[int]:
        raise NotImplementedError

    def close(self) -> None:
        raise NotImplementedError


# ----------------------------------------------------------------------------- confluent-kafka


class ConfluentMember(Member):
    def __init__(self, bootstrap: str, group: str, topic: str, name: str, instance_id: str | None = None,
                 assignor: str = "range", listener: Callable[[str, str, list[int]], None] | None = None,
                 **config: Any) -> None:
        """``listener(name, "assign" | "revoke" | "lost", partitions)`` is called first in each rebalance
        callback; lost partitions count as revoked, as confluent-kafka counts them without an on_lost."""
        from confluent_kafka import Consumer

        self.name = name
        settings: dict[str, Any] = {
            "bootstrap.servers": bootstrap, "group.id": group, "auto.offset.reset": "earliest",
            "enable.auto.commit": False, "session.timeout.ms": SESSION_MS, "heartbeat.interval.ms": HEARTBEAT_MS,
            "max.poll.interval.ms": POLL_INTERVAL_MS, "partition.assignment.strategy": assignor,
            "client.id": name, **config,
        }
        if config.get("group.protocol") == "consumer":
            # KIP-848: the broker assigns and sets the heartbeat interval; librdkafka refuses these
            for key in ("session.timeout.ms", "heartbeat.interval.ms", "partition.assignment.strategy"):
                del settings[key]
        if instance_id is not None:
            settings["group.instance.id"] = instance_id
        self.consumer = Consumer(settings)
        self.assign_events = 0
        self.revoke_events = 0

        def on_assign(consumer: Any, parts: Any) -> None:
            if listener is not None:
                listener(name, "assign", [tp.partition for tp in parts])
            self.assign_events += 1
            if assignor == "cooperative-sticky":
                consumer.incremental_assign(parts)

        def on_revoke(consumer: Any, parts: Any, kind: str = "revoke") -> None:
            if listener is not None:
                listener(name, kind, [tp.partition for tp in parts])
            self.revoke_events += 1
            if assignor == "cooperative-sticky":
                consumer.incremental_unassign(parts)

        def on_lost(consumer: Any, parts: Any) -> None:
            on_revoke(consumer, parts, "lost")

        self.consumer.subscribe([topic], on_assign=on_assign, on_revoke=on_revoke, on_lost=on_lost)

    def poll(self, timeout: float = 0.05) -> list[Got]:
        from confluent_kafka import KafkaException, TopicPartition

        out = []
        for msg in self.consumer.consume(500, timeout):
            if msg.error() is None:
                out.append(Got(self.name, msg.partition(), msg.offset(), msg.value()))
        if out:
            last: dict[int, int] = {}
            for g in out:
                last[g.partition] = max(last.get(g.partition, -1), g.offset)
            topic = self.consumer.assignment()[0].topic if self.consumer.assignment() else None
            if topic is not None:
                try:
                    self.consumer.commit(offsets=[TopicPartition(topic, p, o + 1) for p, o in last.items()],
                                         asynchronous=False)
                except KafkaException:
                    pass  # a rebalance is under way: the records may come again
        return out

    def assignment(self) -> set[int]:
        return {tp.partition for tp in self.consumer.assignment()}

    def close(self) -> None:
        self.consumer.close()


# ----------------------------------------------------------------------------- kafka-python


class KafkaPythonMember(Member):
    """kafka-python drives rebalances from ``poll()``, so each member polls on a thread of its own
    as applications do (a single thread polling several consumers in turn with short timeouts makes
    kafka-python 3.0 drop finished JoinGroup/SyncGroup round trips and rejoin for ever)."""

    def __init__(self, bootstrap: str, group: str, topic: str, name: str, instance_id: str | None = None,
                 assignor: str = "range", **config: Any) -> None:
        from kafka import KafkaConsumer, TopicPartition
        from kafka.coordinator.assignors.cooperative_sticky import CooperativeStickyAssignor
        from kafka.coordinator.assignors.range import RangePartitionAssignor
        from kafka.coordinator.assignors.roundrobin import RoundRobinPartitionAssignor

        assignors = {"range": RangePartitionAssignor, "roundrobin": RoundRobinPartitionAssignor,
                     "cooperative-sticky": CooperativeStickyAssignor}
        self.name = name
        self.topic = topic
        self._tp = TopicPartition
        self.consumer = KafkaConsumer(
            topic, bootstrap_servers=bootstrap, group_id=group, client_id=name, group_instance_id=instance_id,
            auto_offset_reset="earliest", enable_auto_commit=False, session_timeout_ms=SESSION_MS,
            heartbeat_interval_ms=HEARTBEAT_MS, max_poll_interval_ms=POLL_INTERVAL_MS,
            partition_assignment_strategy=[assignors[assignor]], retry_backoff_ms=50, **config)
        self._got: list[Got] = []
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._error: BaseException | None = None
        self._thread = threading.Thread(target=self._run, name=f"poll-{name}", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        from kafka.errors import KafkaError
        from kafka.structs import OffsetAndMetadata

        try:
            while not self._stop.is_set():
                out = []
                for tp, msgs in self.consumer.poll(timeout_ms=100).items():
                    out.extend(Got(self.name, tp.partition, m.offset, m.value) for m in msgs)
                if not out:
                    continue
                last: dict[int, int] = {}
                for g in out:
                    last[g.partition] = max(last.get(g.partition, -1), g.offset)
                try:
                    self.consumer.commit({self._tp(self.topic, p): OffsetAndMetadata(o + 1, "", -1)
                                          for p, o in last.items()})
                except KafkaError:
                    pass  # a rebalance is under way: the records may come again
                with self._lock:
                    self._got.extend(out)
        except BaseException as exc:  # reported by the next poll()
            self._error = exc

    def poll(self, timeout: float = 0.05) -> list[Got]:
        time.sleep(timeout)
        if self._error is not None:
            raise self._error
        with self._lock:
            out, self._got = self._got, []
        return out

    def assignment(self) -> set[int]:
        return {tp.partition for tp in set(self.consumer.assignment())}

    def close(self) -> None:
        self._stop.set()
        self._thread.join(30)
        self.consumer.close(autocommit=False)


# ----------------------------------------------------------------------------- aiokafka


class AiokafkaMember(Member):
    def __init__(self, bootstrap: str, group: str, topic: str, name: str, loop: LoopThread,
                 instance_id: str | None = None, assignor: str = "range", **config: Any) -> None:
        from aiokafka import AIOKafkaConsumer, TopicPartition
        from aiokafka.coordinator.assignors.range import RangePartitionAssignor
        from aiokafka.coordinator.assignors.roundrobin import RoundRobinPartitionAssignor

        assignors = {"range": RangePartitionAssignor, "roundrobin": RoundRobinPartitionAssignor}
        self.name = name
        self.topic = topic
        self._tp = TopicPartition
        self.loop = loop

        async def start() -> Any:
            consumer = AIOKafkaConsumer(
                topic, bootstrap_servers=bootstrap, group_id=group, client_id=name, group_instance_id=instance_id,
                auto_offset_reset="earliest", enable_auto_commit=False, session_timeout_ms=SESSION_MS,
                heartbeat_interval_ms=HEARTBEAT_MS, max_poll_interval_ms=POLL_INTERVAL_MS,
                partition_assignment_strategy=(assignors[assignor],), retry_backoff_ms=50, **config)
            await consumer.start()
            return consumer

        self.consumer = loop.run(start())

    def poll(self, timeout: float = 0.05) -> list[Got]:
        from aiokafka.errors import KafkaError

        async def run() -> list[Got]:
            out: list[Got] = []
            batches = await self.consumer.getmany(timeout_ms=int(timeout * 1000))
            for tp, msgs in batches.items():
                out.extend(Got(self.name, tp.partition, m.offset, m.value) for m in msgs)
            if out:
                last: dict[int, int] = {}
                for g in out:
                    last[g.partition] = max(last.get(g.partition, -1), g.offset)
                try:
                    await self.consumer.commit({self._tp(self.topic, p): o + 1 for p, o in last.items()})
                except KafkaError:
                    pass  # a rebalance is under way: the records may come again
            return out

        return self.loop.run(run())

    def assignment(self) -> set[int]:
        return {tp.partition for tp in self.consumer.assignment()}

    def close(self) -> None:
        self.loop.run(self.consumer.stop())


# ----------------------------------------------------------------------------- driving


class Clients:
    """Creates members of any client kind and closes whatever is still open at the end."""

    def __init__(self, bootstrap: str, group: str, topic: str) -> None:
        self.bootstrap = bootstrap
        self.group = group
        self.topic = topic
        self.members: list[Member] = []
        self._loop: LoopThread | None = None

    def new(self, kind: str, name: str, **kwargs: Any) -> Member:
        member: Member
        if kind == "confluent-kafka":
            member = ConfluentMember(self.bootstrap, self.group, self.topic, name, **kwargs)
        elif kind == "confluent-kafka-848":  # group.protocol=consumer (KIP-848): the broker assigns
            member = ConfluentMember(self.bootstrap, self.group, self.topic, name,
                                     **{"group.protocol": "consumer", **kwargs})
        elif kind == "kafka-python":
            member = KafkaPythonMember(self.bootstrap, self.group, self.topic, name, **kwargs)
        elif kind == "aiokafka":
            if self._loop is None:
                self._loop = LoopThread()
            member = AiokafkaMember(self.bootstrap, self.group, self.topic, name, self._loop, **kwargs)
        else:
            raise ValueError(kind)
        self.members.append(member)
        return member

    def close(self, member: Member) -> None:
        self.members.remove(member)
        member.close()

    def close_all(self) -> None:
        for member in list(self.members):
            try:
                self.close(member)
            except Exception:  # a member of a broken test: keep closing the others
                pass
        if self._loop is not None:
            self._loop.stop()
            self._loop = None


def poll_until(members: Iterable[Member], done: Callable[[list[Got]], bool], timeout: float = 30,
               what: str = "condition") -> list[Got]:
    """Poll every member in turn until ``done(everything polled so far)``; fail after ``timeout``."""
    members = list(members)
    got: list[Got] = []
    deadline = time.monotonic() + timeout
    while True:
        for member in members:
            got.extend(member.poll(0.02))
        if done(got):
            return got
        if time.monotonic() > deadline:
            assignments = {m.name: sorted(m.assignment()) for m in members}
            raise AssertionError(f"timed out waiting for {what}: got {len(got)} records, assignments {assignments}")


def divides(members: Iterable[Member], partitions: int) -> bool:
    """Every partition is assigned to exactly one member and every member has one."""
    parts = [m.assignment() for m in members]
    owned = [p for a in parts for p in a]
    return all(parts) and sorted(owned) == list(range(partitions))


def produce(bootstrap: str, topic: str, partitions: int, per_partition: int, tag: str) -> dict[int, list[bytes]]:
    """``per_partition`` records into each partition; the values sent, by partition."""
    from confluent_kafka import Producer

    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
    sent: dict[int, list[bytes]] = {}
    for p in range(partitions):
        for i in range(per_partition):
            value = f"{tag}-{p}-{i}".encode()
            producer.produce(topic, value=value, partition=p)
            sent.setdefault(p, []).append(value)
    assert producer.flush(30) == 0
    return sent


def values(got: Iterable[Got]) -> list[bytes]:
    return [g.value for g in got]
