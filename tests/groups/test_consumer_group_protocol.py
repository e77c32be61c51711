"""KIP-848 consumer groups over the wire: ConsumerGroupHeartbeat and ConsumerGroupDescribe (issue: the
new consumer group protocol).

Raw requests drive the coordinator through joins, revocation before reassignment, acks, leaves,
static membership and timeouts, and check the error codes Kafka gives, in Kafka's order of checks.
Timeouts run on the broker's injectable clock (``clock_ahead``), never by sleeping.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable
from typing import Any

import pytest
from kafka.protocol.admin import DeleteTopicsRequest
from kafka.protocol.consumer import OffsetFetchRequest
from kafka.protocol.metadata import ApiVersionsRequest

from minikafka.broker.embedded import BrokerThread
from tests.groups.consumer_group_wire import assigned, beat, describe, heartbeat_request, join
from tests.groups.test_groups_protocol import commit, fetch
from tests.groups.test_groups_protocol import join as classic_join
from tests.kafka_wire import RawClient
from tests.scenario_helpers import clock_ahead, create_topic

NONE = 0
ILLEGAL_GENERATION = 22
UNSUPPORTED_VERSION = 35
INVALID_GROUP_ID = 24
UNKNOWN_MEMBER_ID = 25
INVALID_REQUEST = 42
GROUP_ID_NOT_FOUND = 69
GROUP_MAX_SIZE_REACHED = 81
FENCED_INSTANCE_ID = 82
FENCED_MEMBER_EPOCH = 110
UNRELEASED_INSTANCE_ID = 111
UNSUPPORTED_ASSIGNOR = 112
STALE_MEMBER_EPOCH = 113
INVALID_REGULAR_EXPRESSION = 128

SESSION_MS = 3000
CONFIG = {"group.consumer.session.timeout.ms": str(SESSION_MS), "group.consumer.heartbeat.interval.ms": "500",
          "group.consumer.max.size": "3"}


@pytest.fixture
def cg_broker(start_broker: Callable[..., BrokerThread]) -> BrokerThread:
    return start_broker(CONFIG)


def topic_id(broker: BrokerThread, name: str) -> uuid.UUID:
    def read() -> uuid.UUID:
        assert broker.broker is not None and broker.broker.logs is not None
        return broker.broker.logs.topics()[name].topic_id
    result: uuid.UUID = broker.call(read)
    return result


def wait_for(predicate: Callable[[], bool], timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, "condition not met in time"
        time.sleep(0.02)


def m1_then_m2(c: RawClient, broker: BrokerThread) -> uuid.UUID:
    """Topic t (2 partitions); m1 joins and acks both, then m2 joins (m1 must revoke one). t's id."""
    create_topic(c, "t", 2)
    tid = topic_id(broker, "t")
    join(c, "g", "m1", ["t"])
    beat(c, "g", "m1", 1, owned={tid: [0, 1]})
    join(c, "g", "m2", ["t"])
    return tid


def test_join_revoke_then_reassign(cg_broker: BrokerThread) -> None:
    """m2 joins: m1 first revokes half of its partitions, only then does m2 get them."""
    with RawClient(cg_broker.bootstrap) as c:
        create_topic(c, "t", 4)
        tid = topic_id(cg_broker, "t")
        r1 = join(c, "g", "m1", ["t"])
        assert (r1.error_code, r1.member_id, r1.member_epoch, r1.heartbeat_interval_ms) == (NONE, "m1", 1, 500)
        assert assigned(r1) == {tid: [0, 1, 2, 3]}
        ack = beat(c, "g", "m1", 1, owned={tid: [0, 1, 2, 3]})
        assert (ack.error_code, ack.member_epoch, ack.assignment) == (NONE, 1, None)
        r2 = join(c, "g", "m2", ["t"])
        assert (r2.error_code, r2.member_epoch, assigned(r2)) == (NONE, 2, {})  # m1 still owns them
        revoke = beat(c, "g", "m1", 1)  # m1 keeps its epoch while it revokes
        assert revoke.member_epoch == 1
        kept = assigned(revoke)
        assert kept is not None and len(kept[tid]) == 2
        still = beat(c, "g", "m2", 2)
        assert assigned(still) is None  # nothing new while m1 has not revoked
        [group] = describe(c, "g")
        assert (group.error_code, group.group_state, group.group_epoch, group.assignment_epoch,
                group.assignor_name) == (NONE, "Reconciling", 2, 2, "uniform")
        done = beat(c, "g", "m1", 1, owned=kept)
        assert (done.member_epoch, done.assignment) == (2, None)
        got = beat(c, "g", "m2", 2)
        other = assigned(got)
        assert other is not None and sorted(other[tid] + kept[tid]) == [0, 1, 2, 3]
        [group] = describe(c, "g")
        assert group.group_state == "Stable"
        members = {m.member_id: m for m in group.members}
        assert members["m1"].member_type == 1 and members["m1"].member_epoch == 2
        assert [tp.topic_name for tp in members["m2"].assignment.topic_partitions] == ["t"]


def test_lost_response_and_fencing(cg_broker: BrokerThread) -> None:
    with RawClient(cg_broker.bootstrap) as c:
        m1_then_m2(c, cg_broker)
        kept = assigned(beat(c, "g", "m1", 1))
        assert kept is not None
        assert beat(c, "g", "m1", 1, owned=kept).member_epoch == 2
        # the answer at epoch 2 was lost: epoch 1 with a subset of its partitions is accepted
        assert beat(c, "g", "m1", 1, owned=kept).error_code == NONE
        assert beat(c, "g", "m1", 1).error_code == FENCED_MEMBER_EPOCH  # without partitions it is not
        assert beat(c, "g", "m1", 7).error_code == FENCED_MEMBER_EPOCH  # from the future
        assert beat(c, "g", "nobody", 1).error_code == UNKNOWN_MEMBER_ID
        # a fenced member rejoins with epoch 0 and the same id
        again = join(c, "g", "m1", ["t"])
        assert (again.error_code, again.member_epoch) == (NONE, 2)


@pytest.mark.parametrize(("fields", "code"), [
    ({"member": ""}, INVALID_REQUEST),  # v1: the client generates the member id
    ({"group": " "}, INVALID_REQUEST),
    ({"instance": " "}, INVALID_REQUEST),
    ({"rack": ""}, INVALID_REQUEST),
    ({"rebalance": -1}, INVALID_REQUEST),
    ({"owned": None}, INVALID_REQUEST),
    ({"names": None, "regex": None}, INVALID_REQUEST),
    ({"epoch": -3}, INVALID_REQUEST),
    ({"epoch": -2}, INVALID_REQUEST),  # a static leave needs the instance id
    ({"assignor": "sticky"}, UNSUPPORTED_ASSIGNOR),
    ({"regex": "("}, INVALID_REGULAR_EXPRESSION),
    ({"epoch": 3}, GROUP_ID_NOT_FOUND),  # no such group
    ({"epoch": -1}, GROUP_ID_NOT_FOUND),
])
def test_request_errors(cg_broker: BrokerThread, fields: dict[str, object], code: int) -> None:
    request: dict[str, object] = {"group": "g", "member": "m", "epoch": 0, "rebalance": 300000, "names": ["t"],
                                  "regex": "", "owned": {}, **fields}
    group, member, epoch = request.pop("group"), request.pop("member"), request.pop("epoch")
    with RawClient(cg_broker.bootstrap) as c:
        response = c.request(heartbeat_request(str(group), str(member), int(str(epoch)), **request))  # type: ignore[arg-type]
        assert response.error_code == code
        assert (response.member_id, response.heartbeat_interval_ms, response.assignment) == (None, 0, None)
        assert describe(c, "g")[0].error_code == GROUP_ID_NOT_FOUND  # nothing was written


def test_v0_join_gets_a_member_id_and_v1_leave(cg_broker: BrokerThread) -> None:
    with RawClient(cg_broker.bootstrap) as c:
        r = join(c, "g", "", ["t"], version=0)
        assert r.error_code == NONE and len(r.member_id) == 22
        left = beat(c, "g", r.member_id, -1)
        assert (left.error_code, left.member_id, left.member_epoch) == (NONE, r.member_id, -1)
        assert beat(c, "g", r.member_id, -1).error_code == UNKNOWN_MEMBER_ID
        [group] = describe(c, "g")
        assert (group.group_state, group.members, group.group_epoch) == ("Empty", [], 2)


def test_group_max_size(cg_broker: BrokerThread) -> None:
    with RawClient(cg_broker.bootstrap) as c:
        for m in ("a", "b", "c"):
            assert join(c, "g", m, ["t"]).error_code == NONE
        assert join(c, "g", "d", ["t"]).error_code == GROUP_MAX_SIZE_REACHED
        assert join(c, "g", "a", ["t"]).error_code == NONE  # a known member may rejoin


def test_static_member_leaves_and_is_replaced(cg_broker: BrokerThread) -> None:
    with RawClient(cg_broker.bootstrap) as c:
        create_topic(c, "t", 2)
        tid = topic_id(cg_broker, "t")
        r = join(c, "g", "s1", ["t"], instance="i1")
        assert assigned(r) == {tid: [0, 1]}
        beat(c, "g", "s1", 1, owned={tid: [0, 1]})
        assert join(c, "g", "s2", ["t"], instance="i1").error_code == UNRELEASED_INSTANCE_ID
        assert beat(c, "g", "s2", 1, instance="i1").error_code == FENCED_INSTANCE_ID
        assert beat(c, "g", "s2", -2, instance="i2").error_code == UNKNOWN_MEMBER_ID
        left = beat(c, "g", "s1", -2, instance="i1")
        assert (left.error_code, left.member_epoch) == (NONE, -2)
        epoch_before = describe(c, "g")[0].group_epoch
        back = join(c, "g", "s2", ["t"], instance="i1")
        assert (back.error_code, back.member_epoch, assigned(back)) == (NONE, 1, {tid: [0, 1]})
        [group] = describe(c, "g")
        assert group.group_epoch == epoch_before  # no rebalance
        assert [(m.member_id, m.instance_id) for m in group.members] == [("s2", "i1")]


def test_session_timeout_on_the_broker_clock(cg_broker: BrokerThread) -> None:
    with RawClient(cg_broker.bootstrap) as c:
        tid = m1_then_m2(c, cg_broker)
        assert cg_broker.broker is not None
        with clock_ahead(cg_broker.broker, SESSION_MS + 1000):
            wait_for(lambda: len(describe(c, "g")[0].members) == 0)
        assert beat(c, "g", "m1", 1).error_code == UNKNOWN_MEMBER_ID
        r = join(c, "g", "m1", ["t"])
        assert (r.error_code, assigned(r)) == (NONE, {tid: [0, 1]})


def test_rebalance_timeout_fences_a_member_that_does_not_revoke(cg_broker: BrokerThread) -> None:
    with RawClient(cg_broker.bootstrap) as c:
        create_topic(c, "t", 2)
        tid = topic_id(cg_broker, "t")
        c.request(heartbeat_request("g", "m1", 0, rebalance=1000, names=["t"], regex="", owned={}))
        beat(c, "g", "m1", 1, owned={tid: [0, 1]})
        join(c, "g", "m2", ["t"])
        assert len(assigned(beat(c, "g", "m1", 1)) or {tid: []}) == 1  # m1 must revoke one partition
        assert cg_broker.broker is not None
        with clock_ahead(cg_broker.broker, 1500):
            beat(c, "g", "m2", 2)  # m2 stays alive; m1 never acks
            wait_for(lambda: [m.member_id for m in describe(c, "g")[0].members] == ["m2"])
        assert beat(c, "g", "m1", 1).error_code == UNKNOWN_MEMBER_ID


def test_range_assignor_and_new_partitions(cg_broker: BrokerThread) -> None:
    with RawClient(cg_broker.bootstrap) as c:
        create_topic(c, "t", 3)
        tid = topic_id(cg_broker, "t")
        a = join(c, "g", "a", ["t"], assignor="range")
        beat(c, "g", "a", a.member_epoch, owned=assigned(a))
        join(c, "g", "b", ["t"], assignor="range")
        kept = assigned(beat(c, "g", "a", 1))
        assert kept == {tid: [0, 1]}  # range: a (sorted first) gets the contiguous range with the extra one
        beat(c, "g", "a", 1, owned=kept)
        b = beat(c, "g", "b", 2)
        assert assigned(b) == {tid: [2]}
        assert describe(c, "g")[0].assignor_name == "range"


def resolved_regexes(broker: BrokerThread, group: str) -> dict[str, tuple[str, ...]]:
    """The group's resolved regular expressions (from its records), regex -> topics."""
    def read() -> dict[str, tuple[str, ...]]:
        assert broker.broker is not None and broker.broker.groups is not None
        return {r: v.topics for r, v in broker.broker.groups.consumer.groups[group].regexes.items()}
    result: dict[str, tuple[str, ...]] = broker.call(read)
    return result


def beat_until(c: RawClient, group: str, member: str, epoch: int, want: dict[uuid.UUID, list[int]]) -> Any:
    """Heartbeat (acking what each response assigns) until the response assigns ``want``."""
    found: list[Any] = []

    def assigns_want() -> bool:
        r = beat(c, group, member, found[-1].member_epoch if found else epoch,
                 owned=assigned(found[-1]) if found and found[-1].assignment is not None else None)
        assert r.error_code == NONE
        found.append(r)
        return assigned(r) == want
    wait_for(assigns_want)
    return found[-1]


def test_regex_subscription_and_topics_created_later(start_broker: Callable[..., BrokerThread]) -> None:
    """As Kafka: a regex new to the group is resolved in the background, after the heartbeat that
    brings it (which gets only the named topics); a topic created later is picked up by the next
    resolution, at least 10 s after the last one; the resolutions are records, kept on restart."""
    broker = start_broker({**CONFIG, "group.consumer.session.timeout.ms": "60000"})  # outlives clock_ahead
    with RawClient(broker.bootstrap) as c:
        create_topic(c, "orders-1", 1)
        create_topic(c, "other", 1)
        first, other = topic_id(broker, "orders-1"), topic_id(broker, "other")
        r = join(c, "g", "m", ["other"], regex="orders-.*")
        assert (r.error_code, r.member_epoch, assigned(r)) == (NONE, 1, {other: [0]})  # the regex: not yet
        r = beat_until(c, "g", "m", r.member_epoch, {other: [0], first: [0]})
        assert r.member_epoch == 2  # the resolution bumped the group epoch
        assert resolved_regexes(broker, "g") == {"orders-.*": ("orders-1",)}
        r = beat(c, "g", "m", r.member_epoch, owned={other: [0], first: [0]})
        create_topic(c, "orders-2", 2)
        second = topic_id(broker, "orders-2")
        r = beat(c, "g", "m", r.member_epoch)
        assert (r.error_code, r.member_epoch, assigned(r)) == (NONE, 2, None)  # within 10 s: no resolution
        assert describe(c, "g")[0].group_epoch == 2
        assert broker.broker is not None
        with clock_ahead(broker.broker, 10_001):
            r = beat_until(c, "g", "m", r.member_epoch, {other: [0], first: [0], second: [0, 1]})
        assert r.member_epoch == 3
        assert resolved_regexes(broker, "g") == {"orders-.*": ("orders-1", "orders-2")}
        [member] = describe(c, "g")[0].members
        assert (member.subscribed_topic_regex, member.subscribed_topic_names) == ("orders-.*", ["other"])
    broker.restart(clean=False)
    assert resolved_regexes(broker, "g") == {"orders-.*": ("orders-1", "orders-2")}
    with RawClient(broker.bootstrap) as c:
        assert describe(c, "g")[0].group_epoch == 3


def test_regex_refresh_interval_and_a_deleted_topic(start_broker: Callable[..., BrokerThread]) -> None:
    """A deleted topic starts no resolution (it leaves the subscribed metadata: the group epoch
    is bumped and its partitions go); ``group.consumer.regex.refresh.interval.ms`` after the last
    resolution a heartbeat resolves again, which bumps the group epoch only when the regex's topics
    changed."""
    broker = start_broker({**CONFIG, "group.consumer.session.timeout.ms": "60000",
                           "group.consumer.regex.refresh.interval.ms": "20000"})
    with RawClient(broker.bootstrap) as c:
        create_topic(c, "orders-1", 1)
        create_topic(c, "orders-2", 1)
        first, second = topic_id(broker, "orders-1"), topic_id(broker, "orders-2")
        r = join(c, "g", "m", [], regex="orders-.*")
        r = beat_until(c, "g", "m", r.member_epoch, {first: [0], second: [0]})
        r = beat(c, "g", "m", r.member_epoch, owned={first: [0], second: [0]})
        deleted = c.request(DeleteTopicsRequest[4](topic_names=["orders-2"], timeout_ms=1000))
        assert deleted.responses[0].error_code == NONE
        r = beat_until(c, "g", "m", r.member_epoch, {first: [0]})  # orders-2's partition revoked
        r = beat(c, "g", "m", r.member_epoch, owned={first: [0]})
        assert (r.error_code, r.member_epoch) == (NONE, 3)  # bumped for the metadata, not by a resolution:
        assert resolved_regexes(broker, "g") == {"orders-.*": ("orders-1", "orders-2")}
        stamp = resolved_stamp(broker, "g", "orders-.*")
        assert broker.broker is not None
        with clock_ahead(broker.broker, 20_001):
            beat(c, "g", "m", r.member_epoch)
            wait_for(lambda: resolved_stamp(broker, "g", "orders-.*") > stamp)
            assert resolved_regexes(broker, "g") == {"orders-.*": ("orders-1",)}
            assert describe(c, "g")[0].group_epoch == 4  # the regex matches other topics now
            r = beat(c, "g", "m", r.member_epoch)
            assert (r.member_epoch, assigned(r)) == (4, None)
        stamp = resolved_stamp(broker, "g", "orders-.*")
        with clock_ahead(broker.broker, 40_002):
            beat(c, "g", "m", r.member_epoch)
            wait_for(lambda: resolved_stamp(broker, "g", "orders-.*") > stamp)
            assert resolved_regexes(broker, "g") == {"orders-.*": ("orders-1",)}
            assert describe(c, "g")[0].group_epoch == 4  # the same topics: no new epoch


def resolved_stamp(broker: BrokerThread, group: str, regex: str) -> int:
    """When the group's regex was last resolved (the timestamp of its record)."""
    def read() -> int:
        assert broker.broker is not None and broker.broker.groups is not None
        return broker.broker.groups.consumer.groups[group].regexes[regex].timestamp
    result: int = broker.call(read)
    return result


def test_a_regex_the_group_resolved_already_is_assigned_at_once(cg_broker: BrokerThread) -> None:
    """A second member with the same regex needs no resolution: its join bumps the group epoch and
    the target covers the regex's topics; when the last user leaves, the resolution is tombstoned."""
    with RawClient(cg_broker.bootstrap) as c:
        create_topic(c, "orders-1", 2)
        tid = topic_id(cg_broker, "orders-1")
        r = join(c, "g", "a", [], regex="orders-.*")
        a = beat_until(c, "g", "a", r.member_epoch, {tid: [0, 1]})
        b = join(c, "g", "b", [], regex="orders-.*")
        assert (b.error_code, b.member_epoch) == (NONE, a.member_epoch + 1)
        assert describe(c, "g")[0].assignment_epoch == a.member_epoch + 1  # target computed on b's join
        for member in ("a", "b"):
            assert beat(c, "g", member, -1).error_code == NONE
        assert resolved_regexes(cg_broker, "g") == {}


def test_restart_keeps_the_group(cg_broker: BrokerThread) -> None:
    with RawClient(cg_broker.bootstrap) as c:
        create_topic(c, "t", 2)
        tid = topic_id(cg_broker, "t")
        join(c, "g", "m1", ["t"], instance="i1")
        beat(c, "g", "m1", 1, owned={tid: [0, 1]})
        join(c, "g", "m2", ["t"])
        before = describe(c, "g")[0]
    cg_broker.restart(clean=False)
    with RawClient(cg_broker.bootstrap) as c:
        after = describe(c, "g")[0]
        assert (after.group_epoch, after.assignment_epoch, after.group_state) == (
            before.group_epoch, before.assignment_epoch, before.group_state)
        assert sorted((m.member_id, m.member_epoch, m.instance_id) for m in after.members) == sorted(
            (m.member_id, m.member_epoch, m.instance_id) for m in before.members)
        revoke = beat(c, "g", "m1", 1)
        assert revoke.error_code == NONE and len((assigned(revoke) or {})[tid]) == 1


def test_describe_errors_and_classic_groups(cg_broker: BrokerThread) -> None:
    with RawClient(cg_broker.bootstrap) as c:
        classic = c.request(classic_join("classic"))
        assert classic.error_code == NONE
        empty, unknown, other = describe(c, "", "missing", "classic", version=0)
        assert (empty.error_code, empty.group_id) == (INVALID_GROUP_ID, "")
        assert (unknown.error_code, unknown.error_message) == (GROUP_ID_NOT_FOUND, "Group missing not found.")
        assert (other.error_code, other.error_message) == (GROUP_ID_NOT_FOUND,
                                                           "Group classic is not a consumer group.")
        # a running classic group cannot become a consumer group
        assert join(c, "classic", "m", ["t"]).error_code == GROUP_ID_NOT_FOUND


def test_protocol_disabled(start_broker: Callable[..., BrokerThread]) -> None:
    broker = start_broker({"group.coordinator.rebalance.protocols": "classic"})
    with RawClient(broker.bootstrap) as c:
        assert join(c, "g", "m", ["t"]).error_code == UNSUPPORTED_VERSION


def fetch_as_member(client: RawClient, group: str, member: str | None, epoch: int) -> int:
    """OffsetFetch v9 naming a member: the group-level error."""
    Request = OffsetFetchRequest[9]
    G = Request.OffsetFetchRequestGroup
    response = client.request(Request(groups=[G(group_id=group, member_id=member, member_epoch=epoch, topics=None)],
                                      require_stable=False))
    error: int = response.groups[0].error_code
    return error


def test_offset_commits_are_checked_against_member_epochs(cg_broker: BrokerThread) -> None:
    with RawClient(cg_broker.bootstrap) as c:
        create_topic(c, "t", 1)
        tid = topic_id(cg_broker, "t")
        tp = ("t", 0)
        # an empty consumer group accepts an admin commit (generation -1, no member)
        join(c, "g", "m", ["t"])
        beat(c, "g", "m", -1)
        assert commit(c, "g", {tp: (1, None)}, version=9) == {tp: NONE}
        join(c, "g", "m", ["t"])
        beat(c, "g", "m", 3, owned={tid: [0]})
        assert describe(c, "g")[0].members[0].member_epoch == 3
        assert commit(c, "g", {tp: (2, None)}, version=9, generation=3, member_id="m") == {tp: NONE}
        assert commit(c, "g", {tp: (3, None)}, version=9, generation=2, member_id="m") == {tp: STALE_MEMBER_EPOCH}
        assert commit(c, "g", {tp: (3, None)}, version=9, generation=4, member_id="m") == {tp: STALE_MEMBER_EPOCH}
        assert commit(c, "g", {tp: (3, None)}, version=8, generation=3, member_id="m") == {tp: UNSUPPORTED_VERSION}
        assert commit(c, "g", {tp: (3, None)}, version=9, generation=3, member_id="x") == {tp: UNKNOWN_MEMBER_ID}
        assert commit(c, "g", {tp: (3, None)}, version=9) == {tp: UNKNOWN_MEMBER_ID}  # members exist
        assert fetch_as_member(c, "g", "m", 3) == NONE
        assert fetch_as_member(c, "g", None, -1) == NONE
        assert fetch_as_member(c, "g", "m", 2) == STALE_MEMBER_EPOCH
        assert fetch_as_member(c, "g", "x", 3) == UNKNOWN_MEMBER_ID
        assert fetch(c, "g", [tp], version=8)[1][tp][0] == 2
        # a missing group: v9 says so, v8 answers as for a stale generation
        assert commit(c, "nope", {tp: (1, None)}, version=9, generation=1, member_id="m") == {tp: GROUP_ID_NOT_FOUND}
        assert commit(c, "nope", {tp: (1, None)}, version=8, generation=1, member_id="m") == {tp: ILLEGAL_GENERATION}


@pytest.mark.parametrize("version", [3, 4])
def test_api_versions_advertise_the_group_version_feature(start_broker: Callable[..., BrokerThread],
                                                          version: int) -> None:
    def features(broker: BrokerThread) -> tuple[list[tuple[str, int, int]], list[tuple[str, int, int]], set[int]]:
        with RawClient(broker.bootstrap) as c:
            r = c.request(ApiVersionsRequest[version](client_software_name="t", client_software_version="1"))
        keys = {k.api_key for k in r.api_keys if k.api_key in (68, 69) and (k.min_version, k.max_version) == (0, 1)}
        return ([(f.name, f.min_version, f.max_version) for f in r.supported_features],
                [(f.name, f.min_version_level, f.max_version_level) for f in r.finalized_features], keys)

    supported, finalized, keys = features(start_broker())
    assert keys == {68, 69}
    assert supported == ([("group.version", 0, 1)] if version >= 4 else [])  # min 0: hidden before v4
    assert finalized == [("group.version", 1, 1)]
    supported, finalized, keys = features(start_broker({"group.coordinator.rebalance.protocols": "classic"}))
    assert (finalized, keys) == ([], {68, 69})  # listed, answering UNSUPPORTED_VERSION in-band


def test_the_assignors_setting_names_known_assignors(start_broker: Callable[..., BrokerThread]) -> None:
    from minikafka.startup_errors import ConfigError

    with pytest.raises(ConfigError, match="group.consumer.assignors=uniform,sticky: expected a list of uniform, range"):
        start_broker({"group.consumer.assignors": "uniform,sticky"})
    broker = start_broker({"group.consumer.assignors": "range"})  # the first one is the default
    with RawClient(broker.bootstrap) as c:
        join(c, "g", "m", [])
        assert describe(c, "g")[0].assignor_name == "range"
        assert join(c, "g", "n", [], assignor="uniform").error_code == UNSUPPORTED_ASSIGNOR
