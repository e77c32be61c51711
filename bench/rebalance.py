"""Rebalance time of a consumer group of 10 members: join to Stable, a member leaving, a member joining.

The broker is ``minikafka serve`` in a child process with ``group.initial.rebalance.delay.ms`` set
by ``--initial-delay`` (default 0 here; Kafka's default of 3000 ms would add up to 3 s to a cold
start, by design). The topic has as many partitions as the group has members.

Real clients (confluent-kafka, kafka-python, aiokafka), ``--members`` consumers each, with
``heartbeat.interval.ms=100``; ``confluent-kafka-848`` is confluent-kafka with
``group.protocol=consumer`` (KIP-848: the broker assigns with its ``uniform`` assignor and members
reconcile through heartbeats, every ``group.consumer.heartbeat.interval.ms``, 100 here). Times are
measured by the benchmark, polling every consumer's assignment every millisecond:

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
                              [--clients confluent-kafka,confluent-kafka-848,kafka-python,aiokafka,raw]
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import statistics
import struct
import sys
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from kafka.protocol.admin import CreateTopicsRequest  # noqa: E402
from kafka.protocol.consumer import (  # noqa: E402
    HeartbeatRequest,
    JoinGroupRequest,
    LeaveGroupRequest,
    SyncGroupRequest,
)

from bench._serve import serve  # noqa: E402
from tests.groups.group_helpers import Clients, Member  # noqa: E402

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
    topic = f"bench-{kind}"

    async def setup() -> None:
        conn = await Conn.open(bootstrap, "bench-admin")
        await create_topic(conn, topic, count)
        conn.close()

    asyncio.run(setup())
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


# ----------------------------------------------------------------------------- main


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--members", type=int, default=10)
    parser.add_argument("--initial-delay", type=int, default=0, help="group.initial.rebalance.delay.ms")
    parser.add_argument("--clients", default="confluent-kafka,confluent-kafka-848,kafka-python,aiokafka,raw")
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
            else:
                found = client_runs(bootstrap, kind, args.members, args.runs)
            for scenario, times in found.items():
                rows.append((kind, scenario, times))
                print(f"{kind:20} {scenario:6} median {statistics.median(times) * 1000:8.1f} ms   runs (ms): "
                      + ", ".join(f"{t * 1000:.1f}" for t in times), flush=True)
    print(f"\n{args.members} members, group.initial.rebalance.delay.ms={args.initial_delay}, "
          f"heartbeat.interval.ms=100, median of {args.runs} runs")


if __name__ == "__main__":
    main()
