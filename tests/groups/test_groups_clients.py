"""Consumer groups with real clients: confluent-kafka, kafka-python and aiokafka (issue: consumer groups).

For each client: three consumers of one group divide a 6-partition topic; when one leaves the
other two take its partitions over; consumers started later resume exactly at the committed
offsets, also after the broker restarted; a static member (group.instance.id) that restarts gets
its partitions back without a rebalance. Then the clients interoperate in one group, and the
cooperative-sticky assignor moves only the partitions that must move.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager

import pytest

from minikafka.broker.embedded import BrokerThread
from tests.groups.group_helpers import (
    GROUP_BROKER_CONFIG,
    Clients,
    Got,
    Member,
    divides,
    poll_until,
    produce,
    values,
)
from tests.groups.test_groups_protocol import fetch
from tests.kafka_wire import RawClient
from tests.scenario_helpers import create_topic

KINDS = ["confluent-kafka", "kafka-python", "aiokafka"]
PARTITIONS = 6
PER_PARTITION = 10


def flat(sent: dict[int, list[bytes]]) -> set[bytes]:
    return {v for vs in sent.values() for v in vs}


def first_offsets(got: list[Got]) -> dict[int, int]:
    out: dict[int, int] = {}
    for g in got:
        out[g.partition] = min(out.get(g.partition, g.offset), g.offset)
    return out


def committed(bootstrap: str, group: str, topic: str) -> dict[int, int]:
    with RawClient(bootstrap) as c:
        error, offsets = fetch(c, group, None)
    assert error == 0
    return {p: o for (t, p), (o, _epoch, _meta, _err) in offsets.items() if t == topic}


def generation(broker: BrokerThread, group: str) -> tuple[str, int]:
    def read() -> tuple[str, int]:
        assert broker.broker is not None and broker.broker.groups is not None
        g = broker.broker.groups.groups[group]
        return g.state.value, g.generation_id
    result: tuple[str, int] = broker.call(read)
    return result


@contextmanager
def group_on_new_topic(broker: BrokerThread, topic: str, group: str) -> Iterator[Clients]:
    """``topic`` created with PARTITIONS partitions; the members of ``group`` on it are closed at the end."""
    with RawClient(broker.bootstrap) as raw:
        create_topic(raw, topic, partitions=PARTITIONS)
    clients = Clients(broker.bootstrap, group, topic)
    try:
        yield clients
    finally:
        clients.close_all()


def read_and_committed(clients: Clients, members: list[Member], sent: dict[int, list[bytes]], rounds: int,
                       what: str) -> list[Got]:
    """Polls ``members`` until they divide the partitions, have read all of ``sent``, and the group's
    committed offset is ``rounds`` * PER_PARTITION on every partition."""
    return poll_until(members, lambda got: divides(members, PARTITIONS) and flat(sent) <= set(values(got))
                      and committed(clients.bootstrap, clients.group, clients.topic)
                      == dict.fromkeys(range(PARTITIONS), rounds * PER_PARTITION), what=what)


@pytest.fixture
def gbroker(start_broker: Callable[..., BrokerThread]) -> BrokerThread:
    return start_broker(config=GROUP_BROKER_CONFIG)


@pytest.mark.parametrize("kind", KINDS)
def test_group_divides_partitions_takes_over_and_resumes_from_committed_offsets(
        gbroker: BrokerThread, topic_name: str, kind: str) -> None:
    bootstrap = gbroker.bootstrap
    with group_on_new_topic(gbroker, topic_name, f"group-{kind}") as clients:
        members = [clients.new(kind, f"{kind}-{i}") for i in range(3)]
        poll_until(members, lambda got: divides(members, PARTITIONS), what="three members to share the partitions")
        assert sorted(len(m.assignment()) for m in members) == [2, 2, 2]
        first = produce(bootstrap, topic_name, PARTITIONS, PER_PARTITION, "first")
        got = read_and_committed(clients, members, first, 1, what="the members to read and commit everything")
        assert set(values(got)) == flat(first)
        owner = {p: m.name for m in members for p in m.assignment()}
        assert all(owner[g.partition] == g.member for g in got), "a record was read by a member not owning it"

        leaver, rest = members[0], members[1:]
        taken = leaver.assignment()
        clients.close(leaver)
        second = produce(bootstrap, topic_name, PARTITIONS, PER_PARTITION, "second")
        got = read_and_committed(clients, rest, second, 2, what="two members to take over the third member's partitions")
        assert sorted(len(m.assignment()) for m in rest) == [3, 3]
        assert taken <= rest[0].assignment() | rest[1].assignment()
        assert set(values(got)) == flat(second), "records committed before the leave came again"
        for m in rest:
            clients.close(m)

        # new consumers of the group start at the committed offsets
        third = produce(bootstrap, topic_name, PARTITIONS, PER_PARTITION, "third")
        fresh = [clients.new(kind, f"{kind}-fresh-{i}") for i in range(2)]
        got = poll_until(fresh, lambda got: flat(third) <= set(values(got)), what="resume after a restart")
        assert set(values(got)) == flat(third)
        assert first_offsets(got) == dict.fromkeys(range(PARTITIONS), 2 * PER_PARTITION)
        for m in fresh:
            clients.close(m)

        # ... and so they do after the broker restarted
        gbroker.restart()
        fourth = produce(bootstrap, topic_name, PARTITIONS, PER_PARTITION, "fourth")
        again = [clients.new(kind, f"{kind}-again-{i}") for i in range(2)]
        got = poll_until(again, lambda got: flat(fourth) <= set(values(got)), what="resume after a broker restart")
        assert set(values(got)) == flat(fourth)
        assert first_offsets(got) == dict.fromkeys(range(PARTITIONS), 3 * PER_PARTITION)


@pytest.mark.parametrize("kind", KINDS)
def test_static_member_that_restarts_gets_its_partitions_back_without_a_rebalance(
        gbroker: BrokerThread, topic_name: str, kind: str) -> None:
    bootstrap = gbroker.bootstrap
    group = f"static-{kind}"
    with group_on_new_topic(gbroker, topic_name, group) as clients:
        members = [clients.new(kind, f"{kind}-{i}", instance_id=f"instance-{i}") for i in range(3)]
        poll_until(members, lambda got: divides(members, PARTITIONS), what="the static group to form")
        before = [m.assignment() for m in members]
        state = generation(gbroker, group)
        assert state[0] == "Stable"

        # member 2 restarts: static members do not leave, the new instance takes the old one's place
        clients.close(members[2])
        back = clients.new(kind, f"{kind}-back", instance_id="instance-2")
        members = [members[0], members[1], back]
        poll_until(members, lambda got: bool(back.assignment()), what="the restarted static member's partitions")
        assert [m.assignment() for m in members] == before
        assert generation(gbroker, group) == state, "a returning static member must not cause a rebalance"

        data = produce(bootstrap, topic_name, PARTITIONS, 3, "after")
        got = poll_until(members, lambda got: flat(data) <= set(values(got)), what="everyone to consume")
        assert {g.partition for g in got if g.member == back.name} == before[2]
        assert generation(gbroker, group) == state


def test_confluent_kafka_python_and_aiokafka_share_one_group(gbroker: BrokerThread, topic_name: str) -> None:
    bootstrap = gbroker.bootstrap
    with group_on_new_topic(gbroker, topic_name, "mixed") as clients:
        members = [clients.new(kind, kind) for kind in KINDS]
        poll_until(members, lambda got: divides(members, PARTITIONS), what="the mixed group to share the partitions")
        assert sorted(len(m.assignment()) for m in members) == [2, 2, 2]
        first = produce(bootstrap, topic_name, PARTITIONS, PER_PARTITION, "first")
        got = read_and_committed(clients, members, first, 1, what="the mixed group to read and commit everything")
        owner = {p: m.name for m in members for p in m.assignment()}
        assert all(owner[g.partition] == g.member for g in got)
        assert {g.member for g in got} == set(KINDS), "every client reads its own partitions"

        clients.close(members[1])  # kafka-python leaves
        rest = [members[0], members[2]]
        second = produce(bootstrap, topic_name, PARTITIONS, PER_PARTITION, "second")
        got = read_and_committed(clients, rest, second, 2, what="confluent-kafka and aiokafka to take over")
        assert set(values(got)) == flat(second)
        for m in rest:
            clients.close(m)

        third = produce(bootstrap, topic_name, PARTITIONS, PER_PARTITION, "third")
        newcomer = clients.new("kafka-python", "kafka-python-newcomer")
        got = poll_until([newcomer], lambda got: flat(third) <= set(values(got)), what="a newcomer to resume")
        assert set(values(got)) == flat(third)
        assert first_offsets(got) == dict.fromkeys(range(PARTITIONS), 2 * PER_PARTITION)


@pytest.mark.parametrize("kind", ["confluent-kafka", "kafka-python"])
def test_cooperative_sticky_members_only_give_up_partitions_that_move(
        gbroker: BrokerThread, topic_name: str, kind: str) -> None:
    bootstrap = gbroker.bootstrap
    with group_on_new_topic(gbroker, topic_name, f"cooperative-{kind}") as clients:
        members = [clients.new(kind, f"{kind}-{i}", assignor="cooperative-sticky") for i in range(2)]
        poll_until(members, lambda got: divides(members, PARTITIONS), what="two cooperative members to share")
        before = [m.assignment() for m in members]

        # a third member joins: the others give up one partition each (revoke, then a second
        # rebalance hands the freed partitions over) and keep the rest
        members.append(clients.new(kind, f"{kind}-2", assignor="cooperative-sticky"))
        poll_until(members, lambda got: divides(members, PARTITIONS)
                   and sorted(len(m.assignment()) for m in members) == [2, 2, 2],
                   what="the third cooperative member to get its share")
        for member, old in zip(members, before, strict=False):
            assert member.assignment() <= old, "a cooperative member was given another member's partition"

        # one leaves: nobody else loses anything, they only gain the leaver's partitions
        kept = [m.assignment() for m in members[1:]]
        revoked = [getattr(m, "revoke_events", 0) for m in members[1:]]
        clients.close(members[0])
        rest = members[1:]
        data = produce(bootstrap, topic_name, PARTITIONS, 5, "coop")
        got = poll_until(rest, lambda got: divides(rest, PARTITIONS) and flat(data) <= set(values(got)),
                         what="the cooperative members to take over")
        for member, old in zip(rest, kept, strict=True):
            assert old <= member.assignment(), "a cooperative member lost a partition it did not have to"
        assert set(values(got)) == flat(data)
        assert [getattr(m, "revoke_events", 0) for m in rest] == revoked, "the members that stay revoke nothing"
