"""KIP-848 consumer groups with a real client: confluent-kafka (librdkafka) with
``group.protocol=consumer`` (issue: the new consumer group protocol).

Three consumers share a topic's partitions; one leaves, one crashes (a process killed with
SIGKILL: its session times out on the broker) and the others take its partitions over with no
record consumed twice after it was committed; a static member restarts and gets its partitions
back without a new group epoch; a regular-expression subscription picks up a topic created
later; a restarted broker keeps the group. Every consumer commits each record synchronously
before it counts it, so "consumed" below means "consumed and committed".
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
import uuid
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition

from minikafka.broker.embedded import BrokerThread
from tests.groups.consumer_group_wire import describe
from tests.kafka_wire import RawClient
from tests.scenario_helpers import clock_ahead, create_topic

SESSION_MS = 2000
CONFIG = {"group.consumer.session.timeout.ms": str(SESSION_MS), "group.consumer.heartbeat.interval.ms": "100"}
WAIT = 60.0


def ignore(consumer: Any, partitions: Any) -> None:
    """A rebalance callback: confluent-kafka applies the change itself when the callback returns."""


class Member:
    """One in-process consumer that commits every record before counting it."""

    def __init__(self, bootstrap: str, group: str, topics: list[str], assignor: str | None = None,
                 **config: Any) -> None:
        settings: dict[str, Any] = {"bootstrap.servers": bootstrap, "group.id": group, "group.protocol": "consumer",
                                    "auto.offset.reset": "earliest", "enable.auto.commit": False,
                                    **config}
        if assignor is not None:
            settings["group.remote.assignor"] = assignor
        self.consumer = Consumer(settings)
        # With callbacks, partitions change hands inside poll(), between this consumer's commits.
        self.consumer.subscribe(topics, on_assign=ignore, on_revoke=ignore, on_lost=ignore)
        self.got: list[bytes] = []
        #: (partition, offset) of each record, in the order consumed
        self.positions: list[tuple[int, int]] = []

    def poll(self) -> None:
        message = self.consumer.poll(0.05)
        if message is not None and message.error() is None:
            self.consumer.commit(message=message, asynchronous=False)
            self.got.append(message.value())
            self.positions.append((message.partition(), message.offset()))

    def partitions(self) -> set[tuple[str, int]]:
        return {(tp.topic, tp.partition) for tp in self.consumer.assignment()}

    def close(self) -> None:
        self.consumer.close()


CRASHER = textwrap.dedent("""
    import sys
    from confluent_kafka import Consumer
    bootstrap, group, topic = sys.argv[1:4]
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "group.protocol": "consumer",
                  "auto.offset.reset": "earliest", "enable.auto.commit": False})
    c.subscribe([topic], on_assign=lambda *a: None, on_revoke=lambda *a: None)
    while True:
        m = c.poll(0.05)
        if m is not None and m.error() is None:
            c.commit(message=m, asynchronous=False)
            print("got", m.value().decode(), m.partition(), m.offset(), flush=True)
        print("assigned", len(c.assignment()), flush=True)
""")


class Crasher:
    """A consumer in a child process, to be killed with SIGKILL (no leave, no close)."""

    def __init__(self, bootstrap: str, group: str, topic: str) -> None:
        env = {**os.environ, "PYTHONPATH": os.getcwd()}
        self.proc = subprocess.Popen([sys.executable, "-c", CRASHER, bootstrap, group, topic], env=env,
                                     stdout=subprocess.PIPE, text=True)
        self.got: list[bytes] = []
        self.positions: list[tuple[int, int]] = []
        self.assigned = 0
        self.partial = ""  # the start of a line the child has not finished writing

    def read_until(self, predicate: Callable[[], bool], others: list[Member]) -> None:
        assert self.proc.stdout is not None
        os.set_blocking(self.proc.stdout.fileno(), False)
        deadline = time.monotonic() + WAIT
        while not predicate():
            assert time.monotonic() < deadline, "the child consumer did not get there in time"
            try:
                self.partial += os.read(self.proc.stdout.fileno(), 1 << 16).decode()
            except BlockingIOError:
                pass
            *lines, self.partial = self.partial.split("\n")
            for line in lines:
                kind, _, value = line.strip().partition(" ")
                if kind == "got":
                    record, partition, offset = value.split()
                    self.got.append(record.encode())
                    self.positions.append((int(partition), int(offset)))
                elif kind == "assigned":
                    self.assigned = int(value)
            for m in others:
                m.poll()

    def kill(self) -> None:
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait(10)
        if self.proc.stdout is not None:
            self.proc.stdout.close()


def produce(bootstrap: str, topic: str, values: list[bytes], partitions: int) -> None:
    producer = Producer({"bootstrap.servers": bootstrap})
    for i, value in enumerate(values):
        producer.produce(topic, value=value, partition=i % partitions)
    assert producer.flush(30) == 0


def commit_start(bootstrap: str, group: str, topic: str, partitions: int) -> None:
    admin = Consumer({"bootstrap.servers": bootstrap, "group.id": group})
    try:
        admin.commit(offsets=[TopicPartition(topic, p, 0) for p in range(partitions)], asynchronous=False)
    finally:
        admin.close()


def poll_until(members: list[Member], predicate: Callable[[], bool], timeout: float = WAIT) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, "condition not met in time"
        for m in members:
            m.poll()


@pytest.fixture
def cg_broker(start_broker: Callable[..., BrokerThread]) -> Iterator[BrokerThread]:
    yield start_broker(CONFIG)


def group_epoch(bootstrap: str, group: str) -> tuple[int, list[str]]:
    with RawClient(bootstrap) as c:
        [g] = describe(c, group)
    return g.group_epoch, sorted(m.member_id for m in g.members)


@pytest.mark.parametrize("assignor", ["uniform", "range"])
def test_three_consumers_share_then_one_leaves_and_one_crashes(cg_broker: BrokerThread, assignor: str) -> None:
    bootstrap, topic, group = cg_broker.bootstrap, f"t-{uuid.uuid4().hex[:8]}", f"g-{assignor}"
    with RawClient(bootstrap) as c:
        create_topic(c, topic, 6)
    # The group starts from committed offsets (an admin commit to the still empty group), so no
    # member resets to the log start: librdkafka can re-run a stale reset after a quick revoke.
    commit_start(bootstrap, group, topic, 6)
    stay = Member(bootstrap, group, [topic], assignor)
    leaver = Member(bootstrap, group, [topic], assignor)
    crasher = Crasher(bootstrap, group, topic)
    members = [stay, leaver]
    try:
        crasher.read_until(lambda: crasher.assigned == 2 and len(stay.partitions()) == 2
                           and len(leaver.partitions()) == 2, members)
        # (records are produced once the partitions are shared: librdkafka may hand out a record it
        # fetched for a partition it held before, which would be counted twice here)
        first = [f"a{i}".encode() for i in range(60)]
        produce(bootstrap, topic, first, 6)
        crasher.read_until(lambda: len(stay.got) + len(leaver.got) + len(crasher.got) == 60, members)
        leaver.close()
        members = [stay]
        crasher.read_until(lambda: len(stay.partitions()) == 3 and crasher.assigned == 3, members)
        crasher.kill()
        poll_until(members, lambda: len(stay.partitions()) == 6)  # after the crashed member's session
        second = [f"b{i}".encode() for i in range(60)]
        produce(bootstrap, topic, second, 6)
        poll_until(members, lambda: len(stay.got) + len(leaver.got) + len(crasher.got) >= 120)
        everything = stay.got + leaver.got + crasher.got
        assert sorted(everything) == sorted(first + second), (  # each committed record exactly once
            f"stay {stay.positions} leaver {leaver.positions} crashed {crasher.positions}")
        assert len(group_epoch(bootstrap, group)[1]) == 1
    finally:
        stay.close()
        if crasher.proc.poll() is None:
            crasher.kill()


def test_static_member_gets_its_partitions_back_without_a_rebalance(cg_broker: BrokerThread) -> None:
    bootstrap, topic = cg_broker.bootstrap, "static"
    with RawClient(bootstrap) as c:
        create_topic(c, topic, 4)
    other = Member(bootstrap, "g", [topic])
    static = Member(bootstrap, "g", [topic], **{"group.instance.id": "s1"})
    poll_until([other, static], lambda: len(other.partitions()) == 2 and len(static.partitions()) == 2)
    mine = static.partitions()
    epoch, _ = group_epoch(bootstrap, "g")
    static.close()  # a static member leaves temporarily (epoch -2)
    again = Member(bootstrap, "g", [topic], **{"group.instance.id": "s1"})
    try:
        poll_until([other, again], lambda: again.partitions() == mine)
        assert group_epoch(bootstrap, "g")[0] == epoch
        assert other.partitions().isdisjoint(mine)
    finally:
        other.close()
        again.close()


def test_regex_subscription_picks_up_a_topic_created_later(start_broker: Callable[..., BrokerThread]) -> None:
    """The broker resolves the regex again once a topic was created, at least 10 s (broker clock)
    after its last resolution, as Kafka does; the session outlives that jump of the clock."""
    broker = start_broker({**CONFIG, "group.consumer.session.timeout.ms": "60000"})
    bootstrap = broker.bootstrap
    with RawClient(bootstrap) as c:
        create_topic(c, "orders-eu", 1)
        member = Member(bootstrap, "g", ["^orders-.*"])
        try:
            poll_until([member], lambda: member.partitions() == {("orders-eu", 0)})
            create_topic(c, "orders-us", 2)
            produce(bootstrap, "orders-us", [b"x", b"y"], 2)
            assert broker.broker is not None
            with clock_ahead(broker.broker, 10_001):
                poll_until([member], lambda: sorted(member.got) == [b"x", b"y"])
            assert member.partitions() == {("orders-eu", 0), ("orders-us", 0), ("orders-us", 1)}
        finally:
            member.close()


def test_a_restarted_broker_keeps_the_group(cg_broker: BrokerThread) -> None:
    bootstrap, topic = cg_broker.bootstrap, "keep"
    with RawClient(bootstrap) as c:
        create_topic(c, topic, 2)
    produce(bootstrap, topic, [b"1", b"2"], 2)
    members = [Member(bootstrap, "g", [topic]), Member(bootstrap, "g", [topic])]
    try:
        poll_until(members, lambda: sum(len(m.got) for m in members) == 2
                   and all(len(m.partitions()) == 1 for m in members))
        before = group_epoch(bootstrap, "g")
        cg_broker.restart(clean=False)
        assert group_epoch(bootstrap, "g") == before  # members and epoch replayed from __consumer_offsets
        produce(bootstrap, topic, [b"3", b"4"], 2)
        poll_until(members, lambda: sum(len(m.got) for m in members) == 4)
        assert sorted(v for m in members for v in m.got) == [b"1", b"2", b"3", b"4"]
        assert group_epoch(bootstrap, "g") == before
    finally:
        for m in members:
            m.close()


def test_consume_transform_produce_commits_offsets_in_transactions(cg_broker: BrokerThread) -> None:
    """send_offsets_to_transaction with a KIP-848 member's group metadata: TxnOffsetCommit is checked
    against the member's epoch, and the offsets become visible with the transaction's commit."""
    bootstrap = cg_broker.bootstrap
    with RawClient(bootstrap) as c:
        create_topic(c, "in", 2)
        create_topic(c, "out", 1)
    produce(bootstrap, "in", [f"r{i}".encode() for i in range(20)], 2)
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "ctp", "group.protocol": "consumer",
                         "auto.offset.reset": "earliest", "enable.auto.commit": False,
                         "isolation.level": "read_committed"})
    consumer.subscribe(["in"])
    producer = Producer({"bootstrap.servers": bootstrap, "transactional.id": "ctp-1"})
    producer.init_transactions(30)
    done = 0
    deadline = time.monotonic() + WAIT
    try:
        while done < 20:
            assert time.monotonic() < deadline, "not everything was transformed in time"
            batch = consumer.consume(10, 0.2)
            batch = [m for m in batch if m.error() is None]
            if not batch:
                continue
            producer.begin_transaction()
            for m in batch:
                producer.produce("out", value=m.value().upper())
            producer.send_offsets_to_transaction(consumer.position(consumer.assignment()),
                                                 consumer.consumer_group_metadata(), 30)
            producer.commit_transaction(30)
            done += len(batch)
        committed = consumer.committed([TopicPartition("in", 0), TopicPartition("in", 1)], 10)
        assert sorted(tp.offset for tp in committed) == [10, 10]
    finally:
        consumer.close()
    reader = Consumer({"bootstrap.servers": bootstrap, "group.id": "reader", "auto.offset.reset": "earliest",
                       "isolation.level": "read_committed"})
    reader.assign([TopicPartition("out", 0)])
    out: list[bytes] = []
    deadline = time.monotonic() + WAIT
    while len(out) < 20 and time.monotonic() < deadline:
        m = reader.poll(0.2)
        if m is not None and m.error() is None:
            out.append(m.value())
    reader.close()
    assert sorted(out) == sorted(f"R{i}".encode() for i in range(20))
