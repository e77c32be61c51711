"""The classic group protocol over the wire, byte for byte (issue: consumer groups).

Raw requests from tests.kafka_wire drive the coordinator through Kafka's states and check the
error codes Kafka gives: MEMBER_ID_REQUIRED, REBALANCE_IN_PROGRESS, ILLEGAL_GENERATION,
UNKNOWN_MEMBER_ID, FENCED_INSTANCE_ID, INCONSISTENT_GROUP_PROTOCOL and the rest. A JoinGroup that
parks is sent first and read later, as a client's pipelined request would be.
"""

from __future__ import annotations

import struct
import time
from collections.abc import Callable
from typing import Any

import pytest
from kafka.protocol.admin import (
    DeleteGroupsRequest,
    DescribeGroupsRequest,
    ListGroupsRequest,
)
from kafka.protocol.consumer import (
    HeartbeatRequest,
    JoinGroupRequest,
    LeaveGroupRequest,
    OffsetCommitRequest,
    OffsetDeleteRequest,
    OffsetFetchRequest,
    SyncGroupRequest,
)
from kafka.protocol.metadata import FindCoordinatorRequest

from minikafka.broker.embedded import BrokerThread
from tests.kafka_wire import RawClient
from tests.scenario_helpers import clock_ahead, create_topic

NONE = 0
UNKNOWN_TOPIC_OR_PARTITION = 3
OFFSET_METADATA_TOO_LARGE = 12
NOT_COORDINATOR = 16
ILLEGAL_GENERATION = 22
INCONSISTENT_GROUP_PROTOCOL = 23
INVALID_GROUP_ID = 24
UNKNOWN_MEMBER_ID = 25
INVALID_SESSION_TIMEOUT = 26
REBALANCE_IN_PROGRESS = 27
INVALID_REQUEST = 42
NON_EMPTY_GROUP = 68
GROUP_ID_NOT_FOUND = 69
MEMBER_ID_REQUIRED = 79
GROUP_MAX_SIZE_REACHED = 81
FENCED_INSTANCE_ID = 82
GROUP_SUBSCRIBED_TO_TOPIC = 86

CONFIG = {"group.initial.rebalance.delay.ms": "0", "group.min.session.timeout.ms": "500"}


def subscription(*topics: str) -> bytes:
    """A consumer-protocol subscription, version 0."""
    out = struct.pack(">hi", 0, len(topics))
    for t in topics:
        out += struct.pack(">h", len(t)) + t.encode()
    return out + struct.pack(">i", -1)


def join(group: str, member_id: str = "", *, version: int | None = None, instance: str | None = None,
         session: int = 10000, rebalance: int = 3000, protocols: list[tuple[str, bytes]] | None = None,
         protocol_type: str = "consumer") -> Any:
    """A JoinGroup: v3 (no MEMBER_ID_REQUIRED round trip) unless a version or an instance id is given."""
    if version is None:
        version = 3 if instance is None else 5
    Request = JoinGroupRequest[version]
    protocols = protocols if protocols is not None else [("range", subscription("t"))]
    fields: dict[str, Any] = {
        "group_id": group, "session_timeout_ms": session, "member_id": member_id, "protocol_type": protocol_type,
        "protocols": [Request.JoinGroupRequestProtocol(name=n, metadata=m) for n, m in protocols],
    }
    if version >= 1:
        fields["rebalance_timeout_ms"] = rebalance
    if version >= 5:
        fields["group_instance_id"] = instance
    return Request(**fields)


def sync(group: str, generation: int, member_id: str, assignments: dict[str, bytes] | None = None, *,
         version: int = 3, instance: str | None = None, protocol_name: str = "range") -> Any:
    Request = SyncGroupRequest[version]
    fields: dict[str, Any] = {
        "group_id": group, "generation_id": generation, "member_id": member_id,
        "assignments": [Request.SyncGroupRequestAssignment(member_id=m, assignment=a)
                        for m, a in (assignments or {}).items()],
    }
    if version >= 3:
        fields["group_instance_id"] = instance
    if version >= 5:
        fields["protocol_type"] = "consumer"
        fields["protocol_name"] = protocol_name
    return Request(**fields)


def heartbeat(client: RawClient, group: str, generation: int, member_id: str, instance: str | None = None,
              version: int = 3) -> int:
    Request = HeartbeatRequest[version]
    fields: dict[str, Any] = {"group_id": group, "generation_id": generation, "member_id": member_id}
    if version >= 3:
        fields["group_instance_id"] = instance
    return int(client.request(Request(**fields)).error_code)


def commit(client: RawClient, group: str, offsets: dict[tuple[str, int], tuple[int, str | None]], *,
           version: int = 8, generation: int = -1, member_id: str = "", instance: str | None = None,
           leader_epoch: int = -1) -> dict[tuple[str, int], int]:
    Request = OffsetCommitRequest[version]
    Topic = Request.OffsetCommitRequestTopic
    Partition = Topic.OffsetCommitRequestPartition
    by_topic: dict[str, list[Any]] = {}
    for (topic, p), (offset, meta) in offsets.items():
        pf: dict[str, Any] = {"partition_index": p, "committed_offset": offset, "committed_metadata": meta}
        if version >= 6:
            pf["committed_leader_epoch"] = leader_epoch
        by_topic.setdefault(topic, []).append(Partition(**pf))
    fields: dict[str, Any] = {"group_id": group, "topics": [Topic(name=t, partitions=ps) for t, ps in by_topic.items()]}
    if version >= 1:
        fields["generation_id_or_member_epoch"] = generation
        fields["member_id"] = member_id
    if version >= 7:
        fields["group_instance_id"] = instance
    response = client.request(Request(**fields))
    return {(t.name, p.partition_index): p.error_code for t in response.topics for p in t.partitions}


def fetch(client: RawClient, group: str, partitions: list[tuple[str, int]] | None, version: int = 7
          ) -> tuple[int, dict[tuple[str, int], tuple[int, int, str | None, int]]]:
    """(group error, {(topic, partition): (offset, leader epoch, metadata, error)})."""
    Request = OffsetFetchRequest[version]
    by_topic: dict[str, list[int]] = {}
    for t, p in partitions or []:
        by_topic.setdefault(t, []).append(p)
    if version >= 8:
        RT = Request.OffsetFetchRequestGroup.OffsetFetchRequestTopics
        topics = None if partitions is None else [RT(name=t, partition_indexes=ps) for t, ps in by_topic.items()]
        response = client.request(Request(groups=[Request.OffsetFetchRequestGroup(group_id=group, topics=topics)]))
        g = response.groups[0]
        return g.error_code, {(t.name, p.partition_index): (p.committed_offset, p.committed_leader_epoch, p.metadata,
                                                           p.error_code) for t in g.topics for p in t.partitions}
    RT = Request.OffsetFetchRequestTopic
    topics = None if partitions is None else [RT(name=t, partition_indexes=ps) for t, ps in by_topic.items()]
    response = client.request(Request(group_id=group, topics=topics))
    error = response.error_code if version >= 2 else NONE
    return error, {(t.name, p.partition_index): (p.committed_offset,
                                                 p.committed_leader_epoch if version >= 5 else -1,
                                                 p.metadata, p.error_code)
                   for t in response.topics for p in t.partitions}


def describe(client: RawClient, group: str, version: int = 5) -> Any:
    Request = DescribeGroupsRequest[version]
    fields: dict[str, Any] = {"groups": [group]}
    if version >= 3:
        fields["include_authorized_operations"] = True
    return client.request(Request(**fields)).groups[0]


def stable_member(client: RawClient, group: str, *, version: int | None = None, instance: str | None = None,
                  session: int = 10000, rebalance: int = 3000, assignment: bytes = b"A") -> tuple[str, int]:
    """Join a new group alone and sync: (member id, generation)."""
    r = client.request(join(group, version=version, instance=instance, session=session, rebalance=rebalance))
    if r.error_code == MEMBER_ID_REQUIRED:
        r = client.request(join(group, r.member_id, version=version, session=session, rebalance=rebalance))
    assert r.error_code == NONE, r
    s = client.request(sync(group, r.generation_id, r.member_id, {r.member_id: assignment}, instance=instance))
    assert s.error_code == NONE and s.assignment == assignment, s
    return r.member_id, r.generation_id


def no_response_within(client: RawClient, seconds: float) -> bool:
    """True when nothing arrives on ``client`` for ``seconds`` (the request is parked)."""
    client.sock.settimeout(seconds)
    try:
        return not client.sock.recv(1, 2)  # MSG_PEEK
    except TimeoutError:
        return True
    finally:
        client.sock.settimeout(10)


def wait_rebalancing(client: RawClient, group: str, generation: int, member_id: str) -> None:
    """Wait until the group prepares a rebalance (a JoinGroup sent on another connection got there)."""
    deadline = time.monotonic() + 5
    while heartbeat(client, group, generation, member_id) != REBALANCE_IN_PROGRESS:
        assert time.monotonic() < deadline, "the group never started rebalancing"
        time.sleep(0.01)


def two_members(a: RawClient, b: RawClient, group: str, **timeouts: int) -> tuple[str, str, Any]:
    """A forms ``group`` alone, then B joins, A rejoins and assigns both: generation 2 (the session and
    rebalance timeouts as given). Returns A's and B's member ids and B's SyncGroup answer."""
    a_id, _ = stable_member(a, group, **timeouts)
    join_b = join(group, **timeouts)
    b.send(join_b)
    wait_rebalancing(a, group, 1, a_id)
    a.request(join(group, a_id, **timeouts))
    b_id = b.recv(join_b).member_id
    sync_b = sync(group, 2, b_id)
    b.send(sync_b)
    a.request(sync(group, 2, a_id, {a_id: b"a", b_id: b"b"}))
    return a_id, b_id, b.recv(sync_b)


@pytest.fixture
def gbroker(start_broker: Callable[..., BrokerThread]) -> BrokerThread:
    return start_broker(config=CONFIG)


def clients(broker: BrokerThread, n: int) -> list[RawClient]:
    return [RawClient(broker.bootstrap, client_id=f"member{i}") for i in range(n)]


# ============================================================================ FindCoordinator


@pytest.mark.parametrize("version", range(5))
def test_find_coordinator_names_this_broker_for_groups_and_transactions(gbroker: BrokerThread, version: int) -> None:
    host, port = gbroker.bootstrap.rsplit(":", 1)
    with RawClient(gbroker.bootstrap) as c:
        for key_type in ([0] if version == 0 else [0, 1]):
            if version >= 4:
                r = c.request(FindCoordinatorRequest[version](key_type=key_type, coordinator_keys=["g1", "g2"]))
                assert [(x.key, x.node_id, x.host, x.port, x.error_code) for x in r.coordinators] == [
                    ("g1", 1, host, int(port), NONE), ("g2", 1, host, int(port), NONE)]
            elif version >= 1:
                r = c.request(FindCoordinatorRequest[version](key="g1", key_type=key_type))
                assert (r.error_code, r.node_id, r.host, r.port) == (NONE, 1, host, int(port))
            else:
                r = c.request(FindCoordinatorRequest[version](key="g1"))
                assert (r.error_code, r.node_id, r.host, r.port) == (NONE, 1, host, int(port))
        if version >= 1:
            bad = (FindCoordinatorRequest[version](key_type=7, coordinator_keys=["g"]) if version >= 4
                   else FindCoordinatorRequest[version](key="g", key_type=7))
            r = c.request(bad)
            error = r.coordinators[0].error_code if version >= 4 else r.error_code
            assert error == INVALID_REQUEST


# ============================================================================ JoinGroup / SyncGroup


def test_join_v4_requires_a_member_id_round_trip_then_forms_a_generation(gbroker: BrokerThread) -> None:
    with RawClient(gbroker.bootstrap, client_id="app") as c:
        r = c.request(join("g", version=4))
        assert r.error_code == MEMBER_ID_REQUIRED and r.member_id.startswith("app-") and r.generation_id == -1
        member = r.member_id
        r = c.request(join("g", member, version=4))
        assert (r.error_code, r.generation_id, r.protocol_name, r.leader, r.member_id) == (
            NONE, 1, "range", member, member)
        assert [(m.member_id, m.metadata) for m in r.members] == [(member, subscription("t"))]
        s = c.request(sync("g", 1, member, {member: b"assignment-1"}))
        assert (s.error_code, s.assignment) == (NONE, b"assignment-1")
        assert heartbeat(c, "g", 1, member) == NONE
        d = describe(c, "g")
        assert (d.error_code, d.group_state, d.protocol_type, d.protocol_data) == (NONE, "Stable", "consumer", "range")
        assert [(m.member_id, m.client_id, m.client_host, m.member_metadata, m.member_assignment)
                for m in d.members] == [(member, "app", "/127.0.0.1", subscription("t"), b"assignment-1")]


@pytest.mark.parametrize("version", [0, 1, 2, 3])
def test_join_before_v4_gets_a_member_id_at_once(gbroker: BrokerThread, version: int) -> None:
    with RawClient(gbroker.bootstrap) as c:
        r = c.request(join("g", version=version))
        assert r.error_code == NONE and r.member_id and r.leader == r.member_id and r.generation_id == 1
        s = c.request(sync("g", 1, r.member_id, {r.member_id: b"x"}, version=0))
        assert (s.error_code, s.assignment) == (NONE, b"x")


def test_join_rejects_bad_session_timeouts_group_ids_protocols_and_unknown_members(gbroker: BrokerThread) -> None:
    with RawClient(gbroker.bootstrap) as c:
        assert c.request(join("g", session=100)).error_code == INVALID_SESSION_TIMEOUT
        assert c.request(join("g", session=1_800_001)).error_code == INVALID_SESSION_TIMEOUT
        assert c.request(join("")).error_code == INVALID_GROUP_ID
        assert c.request(join("g", protocols=[])).error_code == INCONSISTENT_GROUP_PROTOCOL
        assert c.request(join("g", protocol_type="")).error_code == INCONSISTENT_GROUP_PROTOCOL
        assert c.request(join("nope", "some-member")).error_code == UNKNOWN_MEMBER_ID
        stable_member(c, "g")
        with RawClient(gbroker.bootstrap) as other:
            # the group speaks "consumer"/"range": another type or no common protocol is refused
            assert other.request(join("g", version=3, protocol_type="connect")).error_code == INCONSISTENT_GROUP_PROTOCOL
            r = other.request(join("g", version=3, protocols=[("roundrobin", b"")]))
            assert r.error_code == INCONSISTENT_GROUP_PROTOCOL


def test_rebalance_waits_for_every_member_and_the_leader_gets_all_metadata(gbroker: BrokerThread) -> None:
    a, b = clients(gbroker, 2)
    with a, b:
        ra = a.request(join("g", protocols=[("roundrobin", b"a-rr"), ("range", b"a-range")]))
        a_id = ra.member_id
        assert (ra.error_code, ra.generation_id, ra.protocol_name) == (NONE, 1, "roundrobin")
        assert a.request(sync("g", 1, a_id, {a_id: b"all"}, protocol_name="roundrobin")).error_code == NONE

        join_b = join("g", protocols=[("range", b"b-range")])
        b.send(join_b)
        wait_rebalancing(a, "g", 1, a_id)
        assert no_response_within(b, 0.3), "B's JoinGroup must wait for A to rejoin"
        assert heartbeat(a, "g", 1, a_id) == REBALANCE_IN_PROGRESS
        assert a.request(sync("g", 1, a_id, protocol_name="roundrobin")).error_code == REBALANCE_IN_PROGRESS
        # commits of the previous generation are still accepted while preparing
        create_topic(a, "t", partitions=2)
        assert commit(a, "g", {("t", 0): (5, "m")}, generation=1, member_id=a_id) == {("t", 0): NONE}

        ra = a.request(join("g", a_id, protocols=[("roundrobin", b"a-rr"), ("range", b"a-range")]))
        rb = b.recv(join_b)
        b_id = rb.member_id
        # only "range" is supported by both; A (the first member) leads and sees both members
        for r in (ra, rb):
            assert (r.error_code, r.generation_id, r.protocol_name, r.leader) == (NONE, 2, "range", a_id)
        assert sorted((m.member_id, m.metadata) for m in ra.members) == sorted(
            [(a_id, b"a-range"), (b_id, b"b-range")])
        assert rb.members == []

        sync_b = sync("g", 2, b_id)
        b.send(sync_b)
        assert no_response_within(b, 0.3), "a follower's SyncGroup waits for the leader's"
        assert heartbeat(a, "g", 2, a_id) == NONE  # CompletingRebalance: heartbeats are fine
        assert commit(a, "g", {("t", 0): (6, "m")}, generation=2, member_id=a_id) == {("t", 0): REBALANCE_IN_PROGRESS}
        sa = a.request(sync("g", 2, a_id, {a_id: b"for-a", b_id: b"for-b"}))
        assert (sa.error_code, sa.assignment) == (NONE, b"for-a")
        assert (b.recv(sync_b).error_code, ) == (NONE, )
        assert heartbeat(a, "g", 1, a_id) == ILLEGAL_GENERATION
        assert a.request(sync("g", 1, a_id)).error_code == ILLEGAL_GENERATION
        assert heartbeat(b, "g", 2, "stranger") == UNKNOWN_MEMBER_ID
        assert commit(a, "g", {("t", 1): (7, None)}, generation=2, member_id=a_id) == {("t", 1): NONE}
        assert commit(a, "g", {("t", 1): (7, None)}, generation=1, member_id=a_id) == {("t", 1): ILLEGAL_GENERATION}
        assert describe(a, "g").group_state == "Stable"


def test_a_protocol_named_twice_by_one_member_counts_once(gbroker: BrokerThread) -> None:
    a, b = clients(gbroker, 2)
    with a, b:
        r = a.request(join("g", protocols=[("range", b"first"), ("range", b"second")]))
        assert (r.error_code, r.protocol_name, [m.metadata for m in r.members]) == (NONE, "range", [b"first"])
        a.request(sync("g", 1, r.member_id, {r.member_id: b"x"}))
        join_b = join("g", protocols=[("range", b"b")])
        b.send(join_b)
        wait_rebalancing(a, "g", 1, r.member_id)
        a.request(join("g", r.member_id, protocols=[("range", b"first"), ("range", b"second")]))
        rb = b.recv(join_b)
        assert (rb.error_code, rb.generation_id, rb.protocol_name) == (NONE, 2, "range")


def test_sync_group_sends_each_member_its_own_assignment_and_fills_missing_ones(gbroker: BrokerThread) -> None:
    a, b = clients(gbroker, 2)
    with a, b:
        a_id, _ = stable_member(a, "g")
        join_b = join("g")
        b.send(join_b)
        wait_rebalancing(a, "g", 1, a_id)
        a.request(join("g", a_id))
        rb = b.recv(join_b)
        sync_b = sync("g", 2, rb.member_id)
        b.send(sync_b)
        assert a.request(sync("g", 2, a_id, {a_id: b"only-a"})).assignment == b"only-a"
        sb = b.recv(sync_b)
        assert (sb.error_code, sb.assignment) == (NONE, b"")


def test_member_that_does_not_rejoin_is_dropped_when_the_rebalance_times_out(gbroker: BrokerThread) -> None:
    a, b, c = clients(gbroker, 3)
    with a, b, c:
        a_id, b_id, synced_b = two_members(a, b, "g", rebalance=1000)
        assert synced_b.error_code == NONE
        # C joins; A rejoins, B stays silent: after the rebalance timeout (1 s) B is out
        join_c = join("g", rebalance=1000)
        c.send(join_c)
        wait_rebalancing(a, "g", 2, a_id)
        started = time.monotonic()
        ra = a.request(join("g", a_id, rebalance=1000))
        rc = c.recv(join_c)
        waited = time.monotonic() - started
        assert 0.7 < waited < 5, waited
        assert ra.generation_id == rc.generation_id == 3
        assert sorted(m.member_id for m in ra.members) == sorted([a_id, rc.member_id])
        assert heartbeat(b, "g", 2, b_id) == UNKNOWN_MEMBER_ID


def test_session_timeout_removes_a_silent_member_and_the_others_rebalance(gbroker: BrokerThread) -> None:
    a, b = clients(gbroker, 2)
    with a, b:
        a_id, b_id, _ = two_members(a, b, "g", session=800)
        # only A heartbeats; B's session (800 ms) expires and the group rebalances
        deadline = time.monotonic() + 5
        while heartbeat(a, "g", 2, a_id) == NONE:
            assert time.monotonic() < deadline, "B's session never expired"
            time.sleep(0.1)
        assert heartbeat(a, "g", 2, a_id) == REBALANCE_IN_PROGRESS
        r = a.request(join("g", a_id, session=800))
        assert (r.error_code, r.generation_id, [m.member_id for m in r.members]) == (NONE, 3, [a_id])
        assert heartbeat(b, "g", 2, b_id) == UNKNOWN_MEMBER_ID


def test_pending_member_id_holds_the_rebalance_until_it_rejoins(gbroker: BrokerThread) -> None:
    a, b = clients(gbroker, 2)
    with a, b:
        a_id, _ = stable_member(a, "g")
        r = b.request(join("g", version=4))
        assert r.error_code == MEMBER_ID_REQUIRED
        pending = r.member_id
        assert heartbeat(a, "g", 1, a_id) == NONE  # a pending member does not start a rebalance
        join_b = join("g", pending, version=4)
        b.send(join_b)
        wait_rebalancing(a, "g", 1, a_id)
        a.request(join("g", a_id))
        rb = b.recv(join_b)
        assert (rb.error_code, rb.member_id, rb.generation_id) == (NONE, pending, 2)


def test_leave_group_by_member_id_and_by_group_instance_id(gbroker: BrokerThread) -> None:
    a, s = clients(gbroker, 2)
    with a, s:
        r = a.request(LeaveGroupRequest[0](group_id="unknown", member_id="m"))
        assert r.error_code == UNKNOWN_MEMBER_ID
        a_id, _ = stable_member(a, "g")
        join_s = join("g", instance="static-1")
        s.send(join_s)
        wait_rebalancing(a, "g", 1, a_id)
        a.request(join("g", a_id))
        s_id = s.recv(join_s).member_id
        assert s_id.startswith("static-1-")
        Leave = LeaveGroupRequest[3]
        r = a.request(Leave(group_id="g", members=[
            Leave.MemberIdentity(member_id="", group_instance_id="static-1"),
            Leave.MemberIdentity(member_id="nobody", group_instance_id=None),
            Leave.MemberIdentity(member_id="", group_instance_id="no-such-instance"),
        ]))
        assert r.error_code == NONE
        assert [(m.member_id, m.group_instance_id, m.error_code) for m in r.members] == [
            ("", "static-1", NONE), ("nobody", None, UNKNOWN_MEMBER_ID), ("", "no-such-instance", UNKNOWN_MEMBER_ID)]
        r = a.request(LeaveGroupRequest[1](group_id="g", member_id=a_id))
        assert r.error_code == NONE
        assert describe(a, "g").group_state == "Empty"
        assert heartbeat(s, "g", 2, s_id, instance="static-1") == UNKNOWN_MEMBER_ID


# ============================================================================ static membership


@pytest.mark.parametrize("version", [5, 9])
def test_static_member_rejoining_with_a_new_id_keeps_the_generation_and_fences_the_old_id(
        gbroker: BrokerThread, version: int) -> None:
    a, s, s2 = clients(gbroker, 3)
    with a, s, s2:
        a_id, _ = stable_member(a, "g", version=version)
        join_s = join("g", version=version, instance="inst")
        s.send(join_s)
        wait_rebalancing(a, "g", 1, a_id)
        a.request(join("g", a_id, version=version))
        s_id = s.recv(join_s).member_id
        sync_s = sync("g", 2, s_id, instance="inst")
        s.send(sync_s)
        a.request(sync("g", 2, a_id, {a_id: b"part-a", s_id: b"part-s"}))
        assert s.recv(sync_s).assignment == b"part-s"

        # the static member restarts: new connection, no member id, same instance id
        r = s2.request(join("g", version=version, instance="inst"))
        new_id = r.member_id
        assert (r.error_code, r.generation_id, r.leader, r.members) == (NONE, 2, a_id, [])
        assert new_id != s_id
        if version >= 9:
            assert r.skip_assignment is False
        sr = s2.request(sync("g", 2, new_id, instance="inst"))
        assert (sr.error_code, sr.assignment) == (NONE, b"part-s")
        assert heartbeat(s, "g", 2, s_id, instance="inst") == FENCED_INSTANCE_ID
        assert heartbeat(a, "g", 2, a_id) == NONE, "no rebalance for a returning static member"
        assert heartbeat(s2, "g", 2, new_id, instance="inst") == NONE
        assert [m.group_instance_id for m in describe(a, "g").members if m.member_id == new_id] == ["inst"]


def test_static_leader_rejoining_with_join_v9_is_told_to_skip_the_assignment(gbroker: BrokerThread) -> None:
    s, s2 = clients(gbroker, 2)
    with s, s2:
        s_id, generation = stable_member(s, "g", version=9, instance="lead")
        r = s2.request(join("g", version=9, instance="lead"))
        assert (r.error_code, r.generation_id, r.leader, r.skip_assignment) == (NONE, generation, r.member_id, True)
        assert [m.member_id for m in r.members] == [r.member_id]
        assert s2.request(sync("g", generation, r.member_id, instance="lead")).assignment == b"A"
        assert heartbeat(s, "g", generation, s_id, instance="lead") == FENCED_INSTANCE_ID


def test_group_max_size_refuses_the_extra_member(start_broker: Callable[..., BrokerThread]) -> None:
    broker = start_broker(config={**CONFIG, "group.max.size": "1"})
    a, b = clients(broker, 2)
    with a, b:
        stable_member(a, "g")
        r = b.request(join("g", version=3))
        assert (r.error_code, r.member_id) == (GROUP_MAX_SIZE_REACHED, "")


# ============================================================================ offsets


@pytest.mark.parametrize("commit_version", range(10))
def test_offset_commit_and_fetch_round_trip_in_every_version(gbroker: BrokerThread, commit_version: int) -> None:
    group = f"simple-{commit_version}"
    with RawClient(gbroker.bootstrap) as c:
        create_topic(c, "t", partitions=3)
        meta = f"meta-{commit_version}" if commit_version % 2 else None
        epoch = 7 if commit_version >= 6 else -1
        errors = commit(c, group, {("t", 0): (42, meta), ("t", 2): (1000 + commit_version, "x" * 4096)},
                        version=commit_version, leader_epoch=epoch)
        assert errors == {("t", 0): NONE, ("t", 2): NONE}
        for fetch_version in range(10):
            error, got = fetch(c, group, [("t", 0), ("t", 1), ("t", 2)], version=fetch_version)
            want_epoch = epoch if fetch_version >= 5 else -1
            assert error == NONE
            assert got == {("t", 0): (42, want_epoch, meta or "", NONE), ("t", 1): (-1, -1, "", NONE),
                           ("t", 2): (1000 + commit_version, want_epoch, "x" * 4096, NONE)}, fetch_version


def test_offset_commit_errors_follow_kafka(gbroker: BrokerThread) -> None:
    a, b = clients(gbroker, 2)
    with a, b:
        create_topic(a, "t", partitions=1)
        assert commit(a, "g0", {("nope", 0): (1, None), ("t", 5): (1, None), ("t", 0): (1, "y" * 4097)}) == {
            ("nope", 0): UNKNOWN_TOPIC_OR_PARTITION, ("t", 5): UNKNOWN_TOPIC_OR_PARTITION,
            ("t", 0): OFFSET_METADATA_TOO_LARGE}
        # a generation on an unknown group: ILLEGAL_GENERATION before v9, GROUP_ID_NOT_FOUND from v9
        assert commit(a, "ghost", {("t", 0): (1, None)}, version=8, generation=3, member_id="m") == {
            ("t", 0): ILLEGAL_GENERATION}
        assert commit(a, "ghost", {("t", 0): (1, None)}, version=9, generation=3, member_id="m") == {
            ("t", 0): GROUP_ID_NOT_FOUND}
        a_id, generation = stable_member(a, "g")
        # a group with members takes commits from its members only
        assert commit(b, "g", {("t", 0): (1, None)}) == {("t", 0): UNKNOWN_MEMBER_ID}
        assert commit(b, "g", {("t", 0): (1, None)}, version=0) == {("t", 0): UNKNOWN_MEMBER_ID}
        assert commit(b, "g", {("t", 0): (1, None)}, generation=generation, member_id="x") == {
            ("t", 0): UNKNOWN_MEMBER_ID}
        assert commit(a, "g", {("t", 0): (1, None)}, generation=generation + 1, member_id=a_id) == {
            ("t", 0): ILLEGAL_GENERATION}
        assert commit(a, "g", {("t", 0): (9, None)}, generation=generation, member_id=a_id, version=7,
                      instance="not-mine") == {("t", 0): UNKNOWN_MEMBER_ID}
        assert commit(a, "g", {("t", 0): (9, "ok")}, generation=generation, member_id=a_id) == {("t", 0): NONE}
        assert fetch(a, "g", [("t", 0)])[1][("t", 0)][0] == 9


def test_offset_fetch_returns_all_offsets_and_serves_several_groups_at_once(gbroker: BrokerThread) -> None:
    with RawClient(gbroker.bootstrap) as c:
        create_topic(c, "t", partitions=2)
        create_topic(c, "u", partitions=1)
        commit(c, "g1", {("t", 0): (1, "a"), ("t", 1): (2, "b"), ("u", 0): (3, None)})
        commit(c, "g2", {("u", 0): (30, "z")})
        assert fetch(c, "g1", None, version=2) == (NONE, {
            ("t", 0): (1, -1, "a", NONE), ("t", 1): (2, -1, "b", NONE), ("u", 0): (3, -1, "", NONE)})
        assert fetch(c, "never-committed", None, version=7) == (NONE, {})
        Request = OffsetFetchRequest[8]
        G = Request.OffsetFetchRequestGroup
        r = c.request(Request(groups=[
            G(group_id="g1", topics=None),
            G(group_id="g2", topics=[G.OffsetFetchRequestTopics(name="u", partition_indexes=[0, 9])]),
        ], require_stable=True))
        got = {g.group_id: (g.error_code, {(t.name, p.partition_index): p.committed_offset
                                           for t in g.topics for p in t.partitions}) for g in r.groups}
        assert got == {"g1": (NONE, {("t", 0): 1, ("t", 1): 2, ("u", 0): 3}),
                       "g2": (NONE, {("u", 0): 30, ("u", 9): -1})}


# ============================================================================ admin


def test_list_and_describe_groups_with_filters(gbroker: BrokerThread) -> None:
    a, c = clients(gbroker, 2)
    with a, c:
        create_topic(c, "t", partitions=1)
        a_id, _ = stable_member(a, "live")
        commit(c, "offsets-only", {("t", 0): (1, None)})

        def listed(version: int, **kw: Any) -> set[tuple[Any, ...]]:
            r = c.request(ListGroupsRequest[version](**kw))
            assert r.error_code == NONE
            return {(g.group_id, g.protocol_type) + ((g.group_state,) if version >= 4 else ())
                    + ((g.group_type,) if version >= 5 else ()) for g in r.groups}

        assert listed(0) == {("live", "consumer"), ("offsets-only", "")}
        assert listed(4, states_filter=["stable"]) == {("live", "consumer", "Stable")}
        assert listed(4, states_filter=["EMPTY", "Dead"]) == {("offsets-only", "", "Empty")}
        assert listed(5, states_filter=[], types_filter=["Classic"]) == {
            ("live", "consumer", "Stable", "classic"), ("offsets-only", "", "Empty", "classic")}
        assert listed(5, states_filter=[], types_filter=["consumer"]) == set()

        for version in range(7):
            d = describe(c, "live", version)
            assert (d.error_code, d.group_id, d.group_state, d.protocol_type, d.protocol_data) == (
                NONE, "live", "Stable", "consumer", "range")
            assert [m.member_id for m in d.members] == [a_id]
            if version >= 3:
                assert d.authorized_operations == {3, 6, 8}
            d = describe(c, "offsets-only", version)
            assert (d.error_code, d.group_state, d.protocol_type, d.members) == (NONE, "Empty", "", [])
            d = describe(c, "unknown", version)
            assert d.group_state == "Dead"
            assert d.error_code == (GROUP_ID_NOT_FOUND if version >= 6 else NONE)


def test_delete_groups_removes_empty_groups_with_their_offsets(gbroker: BrokerThread) -> None:
    a, c = clients(gbroker, 2)
    with a, c:
        create_topic(c, "t", partitions=1)
        stable_member(a, "busy")
        commit(c, "idle", {("t", 0): (5, None)})
        for version in range(3):
            r = c.request(DeleteGroupsRequest[version](groups_names=["busy", "missing", "idle", "idle"]))
            got = {x.group_id: x.error_code for x in r.results}
            if version == 0:
                assert got == {"busy": NON_EMPTY_GROUP, "missing": GROUP_ID_NOT_FOUND, "idle": NONE}
                assert fetch(c, "idle", [("t", 0)]) == (NONE, {("t", 0): (-1, -1, "", NONE)})
            else:
                assert got == {"busy": NON_EMPTY_GROUP, "missing": GROUP_ID_NOT_FOUND, "idle": GROUP_ID_NOT_FOUND}


def test_offset_delete_keeps_offsets_of_subscribed_topics(gbroker: BrokerThread) -> None:
    a, c = clients(gbroker, 2)
    with a, c:
        create_topic(c, "t", partitions=2)
        create_topic(c, "other", partitions=1)
        a_id, generation = stable_member(a, "g")  # subscribed to "t"
        commit(a, "g", {("t", 0): (1, None), ("other", 0): (2, None)}, generation=generation, member_id=a_id)
        R = OffsetDeleteRequest[0]
        T = R.OffsetDeleteRequestTopic

        def delete(group: str, topics: dict[str, list[int]]) -> tuple[int, dict[tuple[str, int], int]]:
            r = c.request(R(group_id=group, topics=[
                T(name=n, partitions=[T.OffsetDeleteRequestPartition(partition_index=p) for p in ps])
                for n, ps in topics.items()]))
            return r.error_code, {(t.name, p.partition_index): p.error_code for t in r.topics for p in t.partitions}

        assert delete("g", {"t": [0], "other": [0], "missing": [0]}) == (NONE, {
            ("t", 0): GROUP_SUBSCRIBED_TO_TOPIC, ("other", 0): NONE, ("missing", 0): UNKNOWN_TOPIC_OR_PARTITION})
        assert fetch(c, "g", None)[1] == {("t", 0): (1, -1, "", NONE)}
        assert delete("nobody", {"t": [0]}) == (GROUP_ID_NOT_FOUND, {})
        assert c.request(LeaveGroupRequest[1](group_id="g", member_id=a_id)).error_code == NONE
        assert delete("g", {"t": [0, 1]}) == (NONE, {("t", 0): NONE, ("t", 1): NONE})
        assert fetch(c, "g", None)[1] == {}


# ============================================================================ durability


@pytest.mark.parametrize("how", ["clean", "crash", "crash-fsync"])
def test_offsets_and_group_state_survive_a_broker_restart(start_broker: Callable[..., BrokerThread],
                                                          how: str) -> None:
    broker = start_broker(config=CONFIG, fsync=how == "crash-fsync")
    with RawClient(broker.bootstrap) as c:
        create_topic(c, "t", partitions=3)
        a_id, generation = stable_member(c, "g", assignment=b"my-partitions")
        for i in range(20):
            commit(c, "g", {("t", i % 3): (i, f"m{i}")}, generation=generation, member_id=a_id)
        commit(c, "simple", {("t", 0): (77, "s")}, version=2)
        assert c.request(DeleteGroupsRequest[0](groups_names=["simple"])).results[0].error_code == NONE
        commit(c, "simple", {("t", 1): (78, "s2")}, version=6, leader_epoch=4)
    broker.restart(clean=how == "clean")
    with RawClient(broker.bootstrap) as c:
        assert fetch(c, "g", None) == (NONE, {("t", 0): (18, -1, "m18", NONE), ("t", 1): (19, -1, "m19", NONE),
                                              ("t", 2): (17, -1, "m17", NONE)})
        assert fetch(c, "simple", None) == (NONE, {("t", 1): (78, 4, "s2", NONE)})
        # the member of the stored generation carries on without a rebalance
        assert heartbeat(c, "g", generation, a_id) == NONE
        d = describe(c, "g")
        assert (d.group_state, [(m.member_id, m.member_assignment) for m in d.members]) == (
            "Stable", [(a_id, b"my-partitions")])
        s = c.request(sync("g", generation, a_id))
        assert (s.error_code, s.assignment) == (NONE, b"my-partitions")


def test_offsets_log_is_compacted_and_replays_to_the_latest_commits(
        start_broker: Callable[..., BrokerThread], monkeypatch: pytest.MonkeyPatch) -> None:
    from minikafka.broker.groups import offset_store

    monkeypatch.setattr(offset_store, "COMPACT_MIN_RECORDS", 100)
    broker = start_broker(config=CONFIG)

    def offsets_log() -> tuple[int, int, int]:
        def read() -> tuple[int, int, int]:
            assert broker.broker is not None and broker.broker.logs is not None
            plog = broker.broker.logs.get_log("__consumer_offsets", 0)
            assert plog is not None
            return plog.log_start_offset, plog.log_end_offset, len(plog.segments)
        return broker.call(read)

    with RawClient(broker.bootstrap) as c:
        create_topic(c, "t", partitions=4)
        for i in range(400):
            commit(c, f"g{i % 2}", {("t", i % 4): (i, f"v{i}")})
        start, end, segments = offsets_log()
        assert end >= 400 and start > 0 and end - start < 150, (start, end)
        assert segments <= 2
    broker.restart(clean=False)
    with RawClient(broker.bootstrap) as c:
        want0 = {("t", p): (396 + p, -1, f"v{396 + p}", NONE) for p in (0, 2)}
        want1 = {("t", p): (396 + p, -1, f"v{396 + p}", NONE) for p in (1, 3)}
        assert fetch(c, "g0", None) == (NONE, want0)
        assert fetch(c, "g1", None) == (NONE, want1)


def test_unreadable_records_in_the_offsets_log_are_skipped_at_load(start_broker: Callable[..., BrokerThread]) -> None:
    from tests.kafka_wire import build_batch, partition_response, produce_request

    broker = start_broker(config=CONFIG)
    with RawClient(broker.bootstrap) as c:
        create_topic(c, "t", partitions=1)
        commit(c, "g", {("t", 0): (5, "before")})
    with RawClient(broker.bootstrap, client_id="__admin_client") as admin:
        for key, value in [(b"\x00", b"junk"), (b"\x00\x07garbage", b""), (b"\x00\x01\x00\x01g", b"\x00\x03")]:
            r = admin.request(produce_request("__consumer_offsets", 0, build_batch(key=key, value=value)))
            assert partition_response(r).error_code == NONE
    with RawClient(broker.bootstrap) as c:
        commit(c, "g", {("t", 0): (6, "after")})
    broker.restart(clean=False)
    with RawClient(broker.bootstrap) as c:
        assert fetch(c, "g", [("t", 0)]) == (NONE, {("t", 0): (6, -1, "after", NONE)})


def test_group_ids_are_opaque_strings_and_never_reach_file_names(start_broker: Callable[..., BrokerThread],
                                                                 tmp_path: Any) -> None:
    broker = start_broker(config=CONFIG, data_dir=tmp_path / "data")
    odd = "../../etc/passwd \u2713 \n\x00 group"
    with RawClient(broker.bootstrap) as c:
        create_topic(c, "t", partitions=1)
        assert commit(c, odd, {("t", 0): (3, "m")}) == {("t", 0): NONE}
        stable_member(c, odd + "-live")
    broker.restart()
    with RawClient(broker.bootstrap) as c:
        assert fetch(c, odd, [("t", 0)]) == (NONE, {("t", 0): (3, -1, "m", NONE)})
        assert describe(c, odd + "-live").group_state == "Stable"
    names = sorted(p.name for p in (tmp_path / "data").iterdir())
    assert [n for n in names if "passwd" in n or "group" in n] == []
    assert not (tmp_path / "etc").exists()


def test_parked_join_is_answered_not_coordinator_when_the_broker_stops(gbroker: BrokerThread) -> None:
    a, b = clients(gbroker, 2)
    with a, b:
        a_id, _ = stable_member(a, "g")
        join_b = join("g", rebalance=60000)
        b.send(join_b)
        wait_rebalancing(a, "g", 1, a_id)
        assert no_response_within(b, 0.2)
        started = time.monotonic()
        gbroker.stop()
        assert time.monotonic() - started < 3
        assert b.recv(join_b).error_code == NOT_COORDINATOR


def test_committed_offsets_expire_after_retention_as_kafka_expires_them(gbroker: BrokerThread) -> None:
    """offsets.retention.minutes (7 days): groups without members lose their offsets, counted from
    the commit (no group management) or from when the group became empty; a Stable consumer group
    keeps the offsets of the topics it subscribes to; an explicit v2-v4 retention wins."""
    assert gbroker.broker is not None
    broker = gbroker.broker
    a, live, c = clients(gbroker, 3)
    with a, live, c:
        create_topic(c, "t", partitions=1)
        create_topic(c, "other", partitions=1)
        commit(c, "simple", {("t", 0): (1, None)})
        commit(c, "short", {("t", 0): (2, None)}, version=2)  # retention_time_ms defaults to -1
        Request = OffsetCommitRequest[2]
        r = c.request(Request(group_id="short", generation_id_or_member_epoch=-1, member_id="", retention_time_ms=1000,
                              topics=[Request.OffsetCommitRequestTopic(name="other", partitions=[
                                  Request.OffsetCommitRequestTopic.OffsetCommitRequestPartition(
                                      partition_index=0, committed_offset=3, committed_metadata=None)])]))
        assert r.topics[0].partitions[0].error_code == NONE
        a_id, generation = stable_member(a, "emptied")
        commit(a, "emptied", {("t", 0): (4, None)}, generation=generation, member_id=a_id)
        assert a.request(LeaveGroupRequest[1](group_id="emptied", member_id=a_id)).error_code == NONE
        live_id, generation = stable_member(live, "live")  # subscribed to "t" only
        commit(live, "live", {("t", 0): (5, None), ("other", 0): (6, None)}, generation=generation,
               member_id=live_id)

        def expire_at(offset_ms: int) -> None:
            def run() -> None:
                with clock_ahead(broker, offset_ms):
                    assert broker.groups is not None
                    broker.groups.offsets.expire_offsets()
            gbroker.call(run)

        expire_at(2000)  # only the explicit 1 s retention has passed
        assert fetch(c, "short", None)[1] == {("t", 0): (2, -1, "", NONE)}
        assert fetch(c, "simple", None)[1] == {("t", 0): (1, -1, "", NONE)}

        expire_at(7 * 24 * 3600 * 1000 + 60_000)
        for group in ("simple", "short", "emptied"):
            assert fetch(c, group, None)[1] == {}, group
        assert fetch(c, "live", None)[1] == {("t", 0): (5, -1, "", NONE)}
        names = {g.group_id for g in c.request(ListGroupsRequest[4](states_filter=[])).groups}
        assert names == {"live"}, "empty groups without offsets are removed"
        assert heartbeat(live, "live", generation, live_id) == NONE


def _version_cases() -> list[tuple[str, int]]:
    from minikafka.broker.dispatch import build_api_table

    names = {"JoinGroup", "SyncGroup", "Heartbeat", "LeaveGroup", "ListGroups"}
    return [(spec.name, v) for spec in build_api_table().values() if spec.name in names
            for v in range(spec.min_version, spec.max_version + 1)]


@pytest.mark.parametrize(("api", "version"), _version_cases(), ids=lambda x: str(x))
def test_every_version_of_the_membership_apis_answers_in_that_version(gbroker: BrokerThread, api: str,
                                                                      version: int) -> None:
    """Encoding check for every advertised version (the other group APIs are swept above)."""
    with RawClient(gbroker.bootstrap) as c:
        if api == "JoinGroup":
            r = c.request(join(f"v{version}", version=version))
            assert r.error_code == (MEMBER_ID_REQUIRED if version >= 4 else NONE)
        elif api == "SyncGroup":
            r = c.request(sync("unknown", 1, "m", {"m": b"x"}, version=version))
            assert r.error_code == UNKNOWN_MEMBER_ID
        elif api == "Heartbeat":
            Request = HeartbeatRequest[version]
            r = c.request(Request(group_id="unknown", generation_id=1, member_id="m"))
            assert r.error_code == UNKNOWN_MEMBER_ID
        elif api == "LeaveGroup":
            Request = LeaveGroupRequest[version]
            r = c.request(Request(group_id="unknown", member_id="m", members=[
                Request.MemberIdentity(member_id="m", group_instance_id=None)]))
            assert r.error_code == (UNKNOWN_MEMBER_ID if version < 3 else NONE)
        else:
            r = c.request(ListGroupsRequest[version]())
            assert r.error_code == NONE
        assert r.API_VERSION == version
