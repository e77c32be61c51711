"""The controller's decisions, as Kafka's controller makes them: placement, fencing, controlled
shutdown, ISR changes from leaders, clean, unclean and preferred elections, and the epochs."""

from __future__ import annotations

from collections.abc import Iterable

import pytest

from minikafka.broker.cluster.controller import Controller, ElectionType, PartitionChange
from minikafka.broker.cluster.partition_state import NO_LEADER, BrokerState, PartitionRegistration
from minikafka.broker.cluster.placement import PlacementError
from minikafka.errors import ErrorCode


def cluster(n: int = 3, racks: Iterable[str | None] | None = None, unclean: bool = False,
            seed: int = 7) -> tuple[Controller, list[PartitionChange]]:
    seen: list[PartitionChange] = []
    rack_list = list(racks) if racks is not None else [None] * n
    controller = Controller([(i + 1, rack_list[i]) for i in range(n)], unclean_allowed=lambda topic: unclean,
                            on_change=seen.extend, seed=seed)
    for node in range(1, n + 1):
        controller.unfence(node)
    return controller, seen


def with_assignment(controller: Controller, *replicas: int) -> PartitionRegistration:
    controller.create_topic("t", 1, -1, assignments=[list(replicas)])
    part = controller.partition("t", 0)
    assert part is not None
    return part


def test_a_new_partition_is_led_by_its_first_replica_with_every_active_replica_in_sync() -> None:
    controller, seen = cluster()
    changes = controller.create_topic("t", 6, 3)
    assert [c.partition for c in changes] == list(range(6)) and seen == changes
    for p in range(6):
        part = controller.partition("t", p)
        assert part is not None
        assert sorted(part.replicas) == [1, 2, 3]
        assert part.isr == part.replicas and part.leader == part.replicas[0]
        assert (part.leader_epoch, part.partition_epoch) == (0, 0)
    leaders = {controller.partition("t", p).leader for p in range(6)}  # type: ignore[union-attr]
    assert leaders == {1, 2, 3}  # each partition shifts the start by one


def test_placement_puts_each_replica_in_another_rack() -> None:
    for seed in range(20):
        controller, _ = cluster(4, racks=["a", "a", "b", "b"], seed=seed)
        controller.create_topic("t", 8, 2)
        for p in range(8):
            part = controller.partition("t", p)
            assert part is not None
            assert {1: "a", 2: "a", 3: "b", 4: "b"}[part.replicas[0]] != {1: "a", 2: "a", 3: "b", 4: "b"}[
                part.replicas[1]]


@pytest.mark.parametrize(("rf", "code", "fragment"), [
    (4, ErrorCode.INVALID_REPLICATION_FACTOR, "only 3 broker(s) are registered"),
    (0, ErrorCode.INVALID_REPLICATION_FACTOR, "must be larger than 0"),
])
def test_a_replication_factor_the_cluster_cannot_place_is_refused(rf: int, code: ErrorCode, fragment: str) -> None:
    controller, seen = cluster()
    with pytest.raises(PlacementError) as raised:
        controller.create_topic("t", 1, rf)
    assert raised.value.code == code and fragment in str(raised.value)
    assert controller.topics == {} and seen == []


def test_fenced_brokers_count_as_registered_but_none_active_is_refused() -> None:
    controller, _ = cluster()
    for node in (1, 2, 3):
        controller.fence(node)
    with pytest.raises(PlacementError, match="All brokers are currently fenced"):
        controller.create_topic("t", 1, 3)


@pytest.mark.parametrize(("assignments", "fragment"), [
    ([[1, 1]], "duplicate replica"),
    ([[1, 9]], "broker 9"),
    ([[1, 2], [3]], "same replication factor"),
    ([[]], "empty replica list"),
])
def test_a_bad_manual_assignment_is_refused(assignments: list[list[int]], fragment: str) -> None:
    controller, _ = cluster()
    with pytest.raises(PlacementError) as raised:
        controller.create_topic("t", -1, -1, assignments=assignments)
    assert raised.value.code == ErrorCode.INVALID_REPLICA_ASSIGNMENT and fragment in str(raised.value)


def test_a_manual_assignment_keeps_its_order() -> None:
    controller, _ = cluster()
    part = with_assignment(controller, 3, 1, 2)
    assert part.replicas == (3, 1, 2) and part.leader == 3


def test_fencing_the_leader_elects_the_next_in_sync_replica_in_assignment_order() -> None:
    controller, seen = cluster()
    with_assignment(controller, 2, 3, 1)
    seen.clear()
    controller.fence(2)
    part = controller.partition("t", 0)
    assert part == PartitionRegistration(replicas=(2, 3, 1), isr=(3, 1), leader=3, leader_epoch=1, partition_epoch=1)
    assert [(c.before.leader, c.after.leader) for c in seen if c.before] == [(2, 3)]
    assert [b.node_id for b in controller.listed()] == [1, 3]


def test_fencing_a_follower_shrinks_the_isr_without_a_new_leader_epoch() -> None:
    controller, _ = cluster()
    with_assignment(controller, 1, 2, 3)
    controller.fence(3)
    assert controller.partition("t", 0) == PartitionRegistration((1, 2, 3), (1, 2), 1, 0, 1)


def test_the_last_in_sync_replica_fenced_leaves_no_leader_and_stays_in_the_isr() -> None:
    controller, _ = cluster()
    with_assignment(controller, 1, 2)
    controller.fence(2)
    controller.fence(1)
    part = controller.partition("t", 0)
    assert part is not None
    assert (part.leader, part.isr, part.leader_epoch) == (NO_LEADER, (1,), 1)
    assert part.offline_replicas({b.node_id for b in controller.listed()}) == [1, 2]
    controller.unfence(2)  # not in sync: a clean election cannot pick it
    assert controller.partition("t", 0).leader == NO_LEADER  # type: ignore[union-attr]
    controller.unfence(1)  # the last in-sync replica returns and leads again: one more epoch
    part = controller.partition("t", 0)
    assert part is not None
    assert (part.leader, part.isr, part.leader_epoch) == (1, (1,), 2)


def test_an_rf1_partition_whose_broker_restarts_has_gained_two_epochs() -> None:
    controller, _ = cluster()
    with_assignment(controller, 2)
    controller.fence(2)
    controller.unfence(2)
    part = controller.partition("t", 0)
    assert part is not None and (part.leader, part.leader_epoch, part.partition_epoch) == (2, 2, 2)


def test_unclean_election_takes_the_first_active_replica_and_makes_it_the_only_one_in_sync() -> None:
    controller, _ = cluster(unclean=True)
    with_assignment(controller, 1, 2, 3)
    controller.fence(2)
    controller.fence(3)
    controller.fence(1)  # the last in-sync replica: unclean election at once, but nobody is active
    assert controller.partition("t", 0).leader == NO_LEADER  # type: ignore[union-attr]
    controller.unfence(3)
    part = controller.partition("t", 0)
    assert part is not None and (part.leader, part.isr) == (3, (3,))


def test_controlled_shutdown_moves_leadership_while_the_broker_stays_listed() -> None:
    controller, _ = cluster()
    with_assignment(controller, 1, 2, 3)
    controller.begin_controlled_shutdown(1)
    part = controller.partition("t", 0)
    assert part is not None and (part.leader, part.isr, part.leader_epoch) == (2, (2, 3), 1)
    assert controller.led_by(1) == []
    assert controller.brokers[1].state is BrokerState.CONTROLLED_SHUTDOWN
    assert 1 in [b.node_id for b in controller.listed()]


def test_alter_partition_is_checked_in_kafkas_order() -> None:
    controller, _ = cluster()
    with_assignment(controller, 1, 2, 3)
    assert controller.alter_partition(1, "nope", 0, 0, 0, [1])[0] == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    assert controller.alter_partition(1, "t", 0, 1, 0, [1])[0] == ErrorCode.NOT_CONTROLLER
    assert controller.alter_partition(2, "t", 0, 0, 0, [1, 2])[0] == ErrorCode.INVALID_REQUEST
    code, part = controller.alter_partition(1, "t", 0, 0, 0, [1, 2])  # the leader shrinks the ISR
    assert code == ErrorCode.NONE and part is not None and (part.isr, part.partition_epoch, part.leader_epoch) == (
        (1, 2), 1, 0)
    assert controller.alter_partition(1, "t", 0, 0, 0, [1, 2, 3])[0] == ErrorCode.INVALID_UPDATE_VERSION
    assert controller.alter_partition(1, "t", 0, 0, 1, [2])[0] == ErrorCode.INVALID_REQUEST  # leader left out
    assert controller.alter_partition(1, "t", 0, 0, 1, [1, 4])[0] == ErrorCode.INVALID_REQUEST  # not a replica
    controller.fence(3)
    assert controller.alter_partition(1, "t", 0, 0, 1, [1, 2, 3])[0] == ErrorCode.INELIGIBLE_REPLICA
    controller.move_leader("t", 0, 2)
    assert controller.alter_partition(1, "t", 0, 0, 2, [1, 2])[0] == ErrorCode.FENCED_LEADER_EPOCH


def test_preferred_election() -> None:
    controller, _ = cluster()
    with_assignment(controller, 1, 2, 3)
    assert controller.elect_leaders(ElectionType.PREFERRED, [("t", 0)])[("t", 0)][0] == ErrorCode.ELECTION_NOT_NEEDED
    controller.fence(1)
    assert controller.imbalanced() == [("t", 0)]
    assert controller.elect_leaders(ElectionType.PREFERRED, [("t", 0)])[("t", 0)][0] == (
        ErrorCode.PREFERRED_LEADER_NOT_AVAILABLE)
    controller.unfence(1)  # back, but not in sync until its leader says so
    assert controller.elect_leaders(ElectionType.PREFERRED, None) == {("t", 0): (
        ErrorCode.PREFERRED_LEADER_NOT_AVAILABLE, "Failed to elect leader for partition t-0 under strategy PREFERRED")}
    part = controller.partition("t", 0)
    assert part is not None
    controller.alter_partition(part.leader, "t", 0, part.leader_epoch, part.partition_epoch, [2, 3, 1])
    assert controller.elect_leaders(ElectionType.PREFERRED, None) == {("t", 0): (ErrorCode.NONE, "")}
    part = controller.partition("t", 0)
    assert part is not None and (part.leader, part.leader_epoch) == (1, 2)
    assert controller.elect_leaders(ElectionType.PREFERRED, None) == {}  # nothing needed: left out
    assert controller.imbalanced() == []


def test_balancing_elects_only_preferred_leaders_that_are_active_and_in_sync() -> None:
    controller, _ = cluster()
    with_assignment(controller, 1, 2, 3)
    controller.fence(1)
    assert controller.balance_leaders() == []  # the preferred leader is down
    controller.unfence(1)
    assert controller.balance_leaders() == []  # back, but not in sync yet
    part = controller.partition("t", 0)
    assert part is not None
    controller.alter_partition(part.leader, "t", 0, part.leader_epoch, part.partition_epoch, [2, 3, 1])
    assert controller.balance_leaders() == [("t", 0)]
    assert controller.partition("t", 0).leader == 1  # type: ignore[union-attr]
    assert controller.balance_leaders() == []


def test_unclean_election_by_request() -> None:
    controller, _ = cluster()  # the topic does not allow it by itself; ElectLeaders type 1 does
    with_assignment(controller, 1, 2)
    assert controller.elect_leaders(ElectionType.UNCLEAN, [("t", 0)])[("t", 0)][0] == ErrorCode.ELECTION_NOT_NEEDED
    controller.fence(2)
    controller.fence(1)
    assert controller.elect_leaders(ElectionType.UNCLEAN, [("t", 0)])[("t", 0)][0] == (
        ErrorCode.ELIGIBLE_LEADERS_NOT_AVAILABLE)
    controller.unfence(2)
    assert controller.partition("t", 0).leader == NO_LEADER  # type: ignore[union-attr]
    assert controller.elect_leaders(ElectionType.UNCLEAN, [("t", 0)])[("t", 0)][0] == ErrorCode.NONE
    part = controller.partition("t", 0)
    assert part is not None and (part.leader, part.isr) == (2, (2,))
    assert controller.elect_leaders(ElectionType.UNCLEAN, [("gone", 0)])[("gone", 0)][0] == (
        ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)


def test_move_leader_only_to_an_active_in_sync_replica() -> None:
    controller, _ = cluster()
    with_assignment(controller, 1, 2, 3)
    assert controller.move_leader("t", 0, 3).leader_epoch == 1
    controller.fence(2)
    with pytest.raises(PlacementError, match="not an active in-sync replica"):
        controller.move_leader("t", 0, 2)


def test_create_partitions() -> None:
    controller, _ = cluster()
    controller.create_topic("t", 2, 2)
    with pytest.raises(PlacementError, match="already has 2 partition"):
        controller.create_partitions("t", 2)
    with pytest.raises(PlacementError, match="higher than the requested 1"):
        controller.create_partitions("t", 1)
    with pytest.raises(PlacementError) as raised:
        controller.create_partitions("t", 4, assignments=[[1, 2]])
    assert raised.value.code == ErrorCode.INVALID_REPLICA_ASSIGNMENT
    changes = controller.create_partitions("t", 4)
    assert [c.partition for c in changes] == [2, 3]
    assert all(len(c.after.replicas) == 2 and c.after.leader_epoch == 0 for c in changes)


def test_every_answer_names_a_listed_broker_as_controller() -> None:
    controller, _ = cluster()
    controller.fence(3)
    assert {controller.controller_id() for _ in range(50)} == {1, 2}
    controller.fence(1)
    controller.fence(2)
    assert controller.controller_id() == -1
