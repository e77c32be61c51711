"""KIP-848 consumer groups next to classic groups on one broker (issue: the new consumer group
protocol): ListGroups types and states, DescribeGroups and DeleteGroups on a consumer group, and a
classic member joining a consumer group's id (and the reverse) as Kafka answers them."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from kafka.protocol.admin import DeleteGroupsRequest, DescribeGroupsRequest, ListGroupsRequest

from minikafka.broker.embedded import BrokerThread
from tests.groups.consumer_group_wire import beat, describe, join
from tests.groups.test_groups_protocol import commit, fetch
from tests.groups.test_groups_protocol import join as classic_join
from tests.kafka_wire import RawClient
from tests.scenario_helpers import create_topic

NONE = 0
INCONSISTENT_GROUP_PROTOCOL = 23
NON_EMPTY_GROUP = 68
GROUP_ID_NOT_FOUND = 69


@pytest.fixture
def broker(start_broker: Callable[..., BrokerThread]) -> BrokerThread:
    return start_broker({"group.initial.rebalance.delay.ms": "0"})


def listed(client: RawClient, version: int = 5, states: list[str] | None = None,
           types: list[str] | None = None) -> set[tuple[str, ...]]:
    fields: dict[str, object] = {}
    if version >= 4:
        fields["states_filter"] = states or []
    if version >= 5:
        fields["types_filter"] = types or []
    groups = client.request(ListGroupsRequest[version](**fields)).groups
    if version >= 5:
        return {(g.group_id, g.protocol_type, g.group_state, g.group_type) for g in groups}
    return {(g.group_id, g.protocol_type) for g in groups}


def test_list_groups_shows_both_protocols(broker: BrokerThread) -> None:
    with RawClient(broker.bootstrap) as c:
        assert c.request(classic_join("old")).error_code == NONE
        join(c, "new", "m", [])
        assert listed(c) == {("old", "consumer", "CompletingRebalance", "classic"),
                             ("new", "consumer", "Stable", "consumer")}
        assert listed(c, types=["CONSUMER"]) == {("new", "consumer", "Stable", "consumer")}
        assert listed(c, types=["classic"], states=["completingrebalance"]) == {
            ("old", "consumer", "CompletingRebalance", "classic")}
        assert listed(c, states=["STABLE"]) == {("new", "consumer", "Stable", "consumer")}
        assert listed(c, types=["share"]) == set()
        assert listed(c, version=0) == {("old", "consumer"), ("new", "consumer")}  # at every version


def test_describe_groups_on_a_consumer_group(broker: BrokerThread) -> None:
    with RawClient(broker.bootstrap) as c:
        join(c, "new", "m", [])
        [v5] = c.request(DescribeGroupsRequest[5](groups=["new"], include_authorized_operations=False)).groups
        assert (v5.error_code, v5.group_state, v5.members) == (NONE, "Dead", [])
        [v6] = c.request(DescribeGroupsRequest[6](groups=["new"], include_authorized_operations=False)).groups
        assert (v6.error_code, v6.group_state, v6.error_message) == (
            GROUP_ID_NOT_FOUND, "Dead", "Group new is not a classic group.")


def test_delete_groups_on_a_consumer_group(broker: BrokerThread) -> None:
    with RawClient(broker.bootstrap) as c:
        create_topic(c, "t", 1)
        join(c, "new", "m", [])
        assert commit(c, "new", {("t", 0): (5, None)}, version=9, generation=1, member_id="m") == {("t", 0): NONE}

        def delete() -> int:
            [result] = c.request(DeleteGroupsRequest[2](groups_names=["new"])).results
            code: int = result.error_code
            return code
        assert delete() == NON_EMPTY_GROUP
        beat(c, "new", "m", -1)
        assert delete() == NONE
        assert describe(c, "new")[0].error_code == GROUP_ID_NOT_FOUND
        assert fetch(c, "new", [("t", 0)], version=8)[1][("t", 0)][0] == -1  # its offsets went too
        assert delete() == GROUP_ID_NOT_FOUND
        assert join(c, "new", "m", []).member_epoch == 1  # a later join starts a new group


def test_classic_and_consumer_members_of_one_group_id(broker: BrokerThread) -> None:
    with RawClient(broker.bootstrap) as c:
        create_topic(c, "t", 1)
        join(c, "g", "m", [])
        assert c.request(classic_join("g")).error_code == INCONSISTENT_GROUP_PROTOCOL  # it has members
        assert commit(c, "g", {("t", 0): (7, None)}, version=9, generation=1, member_id="m") == {("t", 0): NONE}
        beat(c, "g", "m", -1)
        classic = c.request(classic_join("g"))  # empty: it becomes a classic group, offsets stay
        assert classic.error_code == NONE
        assert listed(c) == {("g", "consumer", "CompletingRebalance", "classic")}
        assert fetch(c, "g", [("t", 0)], version=8)[1][("t", 0)][0] == 7
        assert join(c, "g", "m2", []).error_code == GROUP_ID_NOT_FOUND  # a running classic group
