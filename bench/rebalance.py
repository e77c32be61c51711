"""Rebalance time of a consumer group of 10 members: join to Stable, a member leaving, a member joining,
and how long partitions go without a consuming owner meanwhile.

The broker is ``minikafka serve`` in a child process with ``group.initial.rebalance.delay.ms`` set
by ``--initial-delay`` (default 0 here; Kafka's default of 3000 ms would add up to 3 s to a cold
start, by design). The topic has as many partitions as the group has members. Every protocol
heartbeats every 100 ms: the classic clients by ``heartbeat.interval.ms=100``, KIP-848 members by
the broker's ``group.consumer.heartbeat.interval.ms=100``.

confluent-kafka, one row per rebalance protocol (``TIMED``): classic eager (``range``,
``roundrobin``), classic ``cooperative-sticky``, and ``group.protocol=consumer`` (KIP-848: the
broker assigns with its ``uniform`` or ``range`` assignor and members reconcile through
heartbeats). Each consumer is polled on a thread of its own and logs its on_assign, on_revoke and
on_lost callbacks with monotonic times (``bench/_group_timeline.py``); a step starts when the
first consumers are created, when the leaving consumer's close() begins, or when the new consumer
is created, and it is settled at the callback after which every member holds its final share
(each one partition, or after a leave every partition held once). For a leave and a join:

* ``leave``/``join``: the settle time;
* ``… paused``: seconds without an owner summed over every partition (a partition stops at its
  owner's revoke and resumes at its next owner's assign);
* ``… unmoved``: the longest pause of a partition that ends with the member that held it before
  (the eager protocols revoke everything, so such partitions pause too; the others never);
* ``… moved``: how many partitions changed owner.

Before a step the coordinator must describe the group as Stable. kafka-python and aiokafka
(classic, ``range``) are timed by polling every consumer's assignment every millisecond:

* ``cold``: all consumers subscribe at once; until each owns exactly one partition.
* ``leave``: one consumer closes (LeaveGroup); until the others own every partition.
* ``join``: a new consumer subscribes; until each of them owns exactly one partition.

The broker alone (``raw``): ``--members`` raw-protocol members of a Stable group on one asyncio
loop, rejoining and syncing at once, as clients with a zero heartbeat interval would:

* ``leave``: from one member's LeaveGroup to the last SyncGroup answer of the others.
* ``join``: from a new member's JoinGroup (the others learn of it from one heartbeat each) to the
  last SyncGroup answer.

Each number is the median of ``--runs`` runs. Usage::

    python bench/rebalance.py [--runs 3] [--members 10] [--initial-delay 0]
                              [--clients confluent-kafka,confluent-kafka-roundrobin,confluent-kafka-cooperative,
                                         confluent-kafka-848,confluent-kafka-848-range,kafka-python,aiokafka,raw]
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import statistics
import struct
import sys
import threading
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from kafka.protocol.admin import CreateTopicsRequest  # noqa: E402
from kafka.protocol.consumer import (  # noqa: E402
    HeartbeatRequest,
    JoinGroupRequest,
    LeaveGroupRequest,
    SyncGroupRequest,
)

from bench._group_timeline import Layout, Timeline, pauses, settled_at  # noqa: E402
from bench._serve import serve  # noqa: E402
from tests.groups.group_helpers import Clients, ConfluentMember, Member  # noqa: E402

if TYPE_CHECKING:
    from confluent_kafka.admin import AdminClient

TIMEOUT = 60.0


# ----------------------------------------------------------------------------- raw protocol


class Conn:
    """One raw Kafka connection on the running loop."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, client_id: str) -> None:
        self.reader, self.writer, self.client_id = reader, writer, client_id
        self.correlation = 0

    @classmethod
    async def open(cls, bootstrap: str, client_id: str) -> Conn:
        host, _, port = bootstrap.rpartition(":")
        reader, writer = await asyncio.open_connection(host, int(port))
        return cls(reader, writer, client_id)

    async def request(self, request: Any) -> Any:
        self.correlation += 1
        request.with_header(correlation_id=self.correlation, client_id=self.client_id)
        self.writer.write(bytes(request.encode(framed=True, header=True)))
        (size,) = struct.unpack(">i", await self.reader.readexactly(4))
        frame = await self.reader.readexactly(size)
        return request.header.get_response_class().decode(frame, header=True)

    def close(self) -> None:
        self.writer.close()


def subscription(topic: str) -> bytes:
    return struct.pack(">hih", 0, 1, len(topic)) + topic.encode() + struct.pack(">i", -1)


class RawMember:
    def __init__(self, conn: Conn, group: str, topic: str) -> None:
        self.conn, self.group, self.topic = conn, group, topic
        self.member_id = ""
        self.generation = -1

    async def join(self) -> Any:
        Request = JoinGroupRequest[5]
        while True:
            r = await self.conn.request(Request(
                group_id=self.group, session_timeout_ms=30000, rebalance_timeout_ms=3000,
                member_id=self.member_id, group_instance_id=None, protocol_type="consumer",
                protocols=[Request.JoinGroupRequestProtocol(name="range", metadata=subscription(self.topic))]))
            if r.error_code == 79:  # MEMBER_ID_REQUIRED
                self.member_id = r.member_id
                continue
            return r

    async def join_and_sync(self) -> int:
        """One rebalance round for this member; 0 when it ends in Stable."""
        r = await self.join()
        if r.error_code:
            return int(r.error_code)
        self.member_id, self.generation = r.member_id, r.generation_id
        Request = SyncGroupRequest[3]
        assignments = [Request.SyncGroupRequestAssignment(member_id=m.member_id, assignment=b"x") for m in r.members]
        s = await self.conn.request(Request(group_id=self.group, generation_id=self.generation,
                                            member_id=self.member_id, group_instance_id=None,
                                            assignments=assignments))
        return int(s.error_code)

    async def heartbeat(self) -> int:
        r = await self.conn.request(HeartbeatRequest[3](group_id=self.group, generation_id=self.generation,
                                                        member_id=self.member_id, group_instance_id=None))
        return int(r.error_code)

    async def leave(self) -> int:
        r = await self.conn.request(LeaveGroupRequest[1](group_id=self.group, member_id=self.member_id))
        return int(r.error_code)


async def raw_stable(members: list[RawMember]) -> None:
    """Each member rejoins until it syncs and its heartbeat says the group is Stable, as a client would."""
    deadline = time.monotonic() + TIMEOUT

    async def settle(m: RawMember) -> None:
        while time.monotonic() < deadline:
            error = await m.join_and_sync()
            if error == 25:  # UNKNOWN_MEMBER_ID: start over with a new member id
                m.member_id = ""
            elif error == 0 and await m.heartbeat() == 0:
                return
        raise TimeoutError(f"raw member {m.member_id} never settled")

    while True:
        await asyncio.gather(*(settle(m) for m in members))
        if len({m.generation for m in members}) == 1 and all([await m.heartbeat() == 0 for m in members]):
            return


async def raw_runs(bootstrap: str, count: int, runs: int) -> dict[str, list[float]]:
    topic = "bench-raw"
    admin = await Conn.open(bootstrap, "bench-admin")
    await create_topic(admin, topic, count)
    results: dict[str, list[float]] = {"leave": [], "join": []}
    for _ in range(runs):
        group = f"raw-{uuid.uuid4().hex[:8]}"
        members = [RawMember(await Conn.open(bootstrap, f"raw{i}"), group, topic) for i in range(count)]
        await raw_stable(members)

        leaver, rest = members[0], members[1:]
        started = time.perf_counter()
        await leaver.leave()
        await raw_stable(rest)
        results["leave"].append(time.perf_counter() - started)

        newcomer = RawMember(leaver.conn, group, topic)
        started = time.perf_counter()
        pending = asyncio.ensure_future(newcomer.join_and_sync())
        while await rest[0].heartbeat() == 0:  # learn of the rebalance as a client does
            await asyncio.sleep(0)
        others = await asyncio.gather(*(m.join_and_sync() for m in rest))
        first = await pending
        if first or any(others):
            await raw_stable([newcomer, *rest])
        results["join"].append(time.perf_counter() - started)
        for m in members:
            m.conn.close()
    admin.close()
    return results


async def create_topic(conn: Conn, name: str, partitions: int) -> None:
    Request = CreateTopicsRequest[5]
    r = await conn.request(Request(topics=[Request.CreatableTopic(
        name=name, num_partitions=partitions, replication_factor=1, assignments=[], configs=[])],
        timeout_ms=5000, validate_only=False))
    assert r.topics[0].error_code in (0, 36), r


# ----------------------------------------------------------------------------- real clients


def wait(members: list[Member], done: Callable[[list[set[int]]], bool], what: str) -> float:
    """Seconds until ``done([assignment of each member])``; polls every member without blocking."""
    started = time.perf_counter()
    while True:
        for m in members:
            m.poll(0)
        if done([m.assignment() for m in members]):
            return time.perf_counter() - started
        if time.perf_counter() - started > TIMEOUT:
            raise TimeoutError(f"{what}: assignments {[sorted(m.assignment()) for m in members]}")
        time.sleep(0.001)


def one_each(partitions: int) -> Callable[[list[set[int]]], bool]:
    def done(assignments: list[set[int]]) -> bool:
        return all(len(a) == 1 for a in assignments) and sorted(p for a in assignments for p in a) == list(
            range(partitions))
    return done


def covers(partitions: int) -> Callable[[list[set[int]]], bool]:
    def done(assignments: list[set[int]]) -> bool:
        return all(assignments) and sorted(p for a in assignments for p in a) == list(range(partitions))
    return done


def client_runs(bootstrap: str, kind: str, count: int, runs: int) -> dict[str, list[float]]:
    topic = make_topic(bootstrap, f"bench-{kind}", count)
    results: dict[str, list[float]] = {"cold": [], "leave": [], "join": []}
    for run in range(runs):
        clients = Clients(bootstrap, f"{kind}-{uuid.uuid4().hex[:8]}", topic)
        try:
            started = time.perf_counter()
            members = [clients.new(kind, f"{kind}-{run}-{i}") for i in range(count)]
            created = time.perf_counter() - started
            results["cold"].append(created + wait(members, one_each(count), "cold start"))

            leaver = members.pop(0)
            started = time.perf_counter()
            clients.close(leaver)
            results["leave"].append(time.perf_counter() - started + wait(members, covers(count), "leave"))

            started = time.perf_counter()
            members.append(clients.new(kind, f"{kind}-{run}-new"))
            results["join"].append(time.perf_counter() - started + wait(members, one_each(count), "join"))
        finally:
            clients.close_all()
    return results


def make_topic(bootstrap: str, topic: str, partitions: int) -> str:
    async def setup() -> None:
        conn = await Conn.open(bootstrap, "bench-admin")
        await create_topic(conn, topic, partitions)
        conn.close()

    asyncio.run(setup())
    return topic


# ----------------------------------------------------------------------------- confluent-kafka, timed by callbacks

#: confluent-kafka's rebalance protocols: classic eager (range, roundrobin), classic cooperative,
#: KIP-848 with each server-side assignor (the broker's heartbeat interval applies)
TIMED: dict[str, dict[str, Any]] = {
    "confluent-kafka": {"assignor": "range"},
    "confluent-kafka-roundrobin": {"assignor": "roundrobin"},
    "confluent-kafka-cooperative": {"assignor": "cooperative-sticky"},
    "confluent-kafka-848": {"group.protocol": "consumer", "group.remote.assignor": "uniform"},
    "confluent-kafka-848-range": {"group.protocol": "consumer", "group.remote.assignor": "range"},
}


class PollThread:
    """One consumer polled on a thread of its own, as applications do, so that its rebalance
    callbacks run as soon as librdkafka hands them over (also while another member closes);
    ``leave()`` closes it on that thread."""

    def __init__(self, member: ConfluentMember) -> None:
        self.member = member
        self.close_started = 0.0
        self._closing = threading.Event()
        self._closed = threading.Event()
        self._thread = threading.Thread(target=self._run, name=f"poll-{member.name}", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        try:
            while not self._closing.is_set():
                self.member.poll(0.02)
        finally:
            self.close_started = time.monotonic()
            self.member.close()
            self._closed.set()

    def leave(self) -> None:
        self._closing.set()

    def closed(self) -> float:
        """Wait for the close that ``leave()`` asked for; the monotonic time it began."""
        if not self._closed.wait(TIMEOUT):
            raise TimeoutError(f"{self.member.name} did not close")
        return self.close_started


def layout_is(members: int, check: Callable[[list[set[int]]], bool]) -> Callable[[Layout], bool]:
    """``check`` on the partitions of each member, once exactly ``members`` members hold some."""
    def done(layout: Layout) -> bool:
        return len(layout) == members and check([set(ps) for ps in layout.values()])
    return done


def broker_stable(admin: AdminClient, group: str) -> None:
    """Wait until the coordinator reports the group Stable (every KIP-848 member has acknowledged
    its assignment), so that the next step starts from a settled group."""
    from confluent_kafka import ConsumerGroupState

    deadline = time.monotonic() + TIMEOUT
    while admin.describe_consumer_groups([group])[group].result(TIMEOUT).state != ConsumerGroupState.STABLE:
        if time.monotonic() > deadline:
            raise TimeoutError(f"group {group} never became Stable")


def timed_runs(bootstrap: str, kind: str, count: int, runs: int) -> dict[str, list[float]]:
    """Settle times and partition pauses of ``count`` confluent-kafka members, from their callbacks."""
    from confluent_kafka.admin import AdminClient

    topic = make_topic(bootstrap, f"bench-{kind}", count)
    admin = AdminClient({"bootstrap.servers": bootstrap})
    results: dict[str, list[float]] = {}
    for run in range(runs):
        for step, value in timed_run(bootstrap, admin, kind, topic, count, f"{kind}-{run}").items():
            results.setdefault(step, []).append(value)
    return results


def timed_run(bootstrap: str, admin: AdminClient, kind: str, topic: str, count: int, name: str) -> dict[str, float]:
    """One cold start, leave and join; the pauses are summed over partitions and taken from the
    start of the step to the callback that settled it."""
    group, timeline = f"{name}-{uuid.uuid4().hex[:8]}", Timeline()
    found: dict[str, float] = {}

    def member(member_name: str) -> PollThread:
        return PollThread(ConfluentMember(bootstrap, group, topic, member_name, listener=timeline.record,
                                          **TIMED[kind]))

    def measure(step: str, since: float, done: Callable[[Layout], bool]) -> None:
        timeline.wait(done, TIMEOUT, step)
        events = timeline.events()
        until = settled_at(events, since, done)
        assert until is not None
        found[step] = until - since
        if step != "cold":
            paused = pauses(events, since, until, count)
            found[f"{step} paused"] = paused.unavailable
            found[f"{step} unmoved"] = paused.longest_unmoved
            found[f"{step} moved"] = paused.moved

    members: list[PollThread] = []
    try:
        started = time.monotonic()
        members += [member(f"{name}-{i}") for i in range(count)]
        measure("cold", started, layout_is(count, one_each(count)))
        broker_stable(admin, group)

        leaver = members.pop(0)
        leaver.leave()
        measure("leave", leaver.closed(), layout_is(count - 1, covers(count)))
        broker_stable(admin, group)

        started = time.monotonic()
        members.append(member(f"{name}-new"))
        measure("join", started, layout_is(count, one_each(count)))
    finally:
        for m in members:
            m.leave()
        for m in members:
            m.closed()
    return found


# ----------------------------------------------------------------------------- main


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--members", type=int, default=10)
    parser.add_argument("--initial-delay", type=int, default=0, help="group.initial.rebalance.delay.ms")
    parser.add_argument("--clients", default=",".join([*TIMED, "kafka-python", "aiokafka", "raw"]))
    args = parser.parse_args()
    logging.basicConfig(level=logging.CRITICAL)
    config = ["--config", f"group.initial.rebalance.delay.ms={args.initial_delay}",
              "--config", "group.min.session.timeout.ms=1000",
              "--config", "group.consumer.heartbeat.interval.ms=100"]
    rows: list[tuple[str, str, list[float]]] = []
    with serve(*config) as (bootstrap, _proc, _dir):
        for kind in args.clients.split(","):
            if kind == "raw":
                found = asyncio.run(raw_runs(bootstrap, args.members, args.runs))
            elif kind in TIMED:
                found = timed_runs(bootstrap, kind, args.members, args.runs)
            else:
                found = client_runs(bootstrap, kind, args.members, args.runs)
            for scenario, times in found.items():
                rows.append((kind, scenario, times))
                if scenario.endswith(" moved"):  # a count of partitions
                    print(f"{kind:28} {scenario:13} median {statistics.median(times):8.1f}      runs: "
                          + ", ".join(f"{t:.0f}" for t in times), flush=True)
                else:
                    print(f"{kind:28} {scenario:13} median {statistics.median(times) * 1000:8.1f} ms   runs (ms): "
                          + ", ".join(f"{t * 1000:.1f}" for t in times), flush=True)
    print(f"\n{args.members} members, group.initial.rebalance.delay.ms={args.initial_delay}, "
          f"heartbeat.interval.ms=100 (classic), group.consumer.heartbeat.interval.ms=100 (KIP-848), "
          f"median of {args.runs} runs")


if __name__ == "__main__":
    main()
