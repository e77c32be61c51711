"""The partition pauses ``bench/rebalance.py`` reports, computed from hand-written callback logs
whose answers can be worked out by hand: an eager rebalance pauses every partition, a
cooperative one only the partition that moves."""

from __future__ import annotations

from bench._group_timeline import Event, Layout, Timeline, pauses, replay, settled_at


def ev(at: float, member: str, kind: str, *partitions: int) -> Event:
    return Event(at, member, kind, frozenset(partitions))


START = [ev(0.0, "a", "assign", 0), ev(0.0, "b", "assign", 1), ev(0.0, "c", "assign", 2)]


def each_holds_one(layout: Layout) -> bool:
    return len(layout) == 3 and all(len(ps) == 1 for ps in layout.values())


def test_replay_adds_assigned_and_drops_revoked_and_lost_partitions() -> None:
    events = [*START, ev(1.0, "a", "revoke", 0), ev(1.0, "b", "lost", 1), ev(2.0, "c", "assign", 0, 1)]
    assert replay(events) == {"c": frozenset({0, 1, 2})}


def test_eager_leave_pauses_every_partition_until_its_assign() -> None:
    # c leaves at 10.0; a and b revoke everything at 10.1 and get their new shares at 10.3 / 10.4
    events = [*START, ev(10.0, "c", "revoke", 2), ev(10.1, "a", "revoke", 0), ev(10.1, "b", "revoke", 1),
              ev(10.3, "a", "assign", 0, 2), ev(10.4, "b", "assign", 1)]

    def two_cover_all(layout: Layout) -> bool:
        return len(layout) == 2 and sorted(p for ps in layout.values() for p in ps) == [0, 1, 2]

    until = settled_at(events, 10.0, two_cover_all)
    assert until == 10.4
    found = pauses(events, 10.0, until, 3)
    assert round(found.unavailable, 6) == 0.3 + 0.2 + 0.3  # partition 2: 10.0-10.3, 0: 10.1-10.3, 1: 10.1-10.4
    assert round(found.longest_unmoved, 6) == 0.3  # partition 1 stayed with b but paused 0.3 s
    assert found.moved == 1


def test_cooperative_join_pauses_only_the_moving_partition() -> None:
    # a holds 0 and 1; d joins at 5.0; a revokes 1 at 5.05 and d gets it at 5.15
    events = [ev(0.0, "a", "assign", 0, 1), ev(0.0, "b", "assign", 2),
              ev(5.05, "a", "revoke", 1), ev(5.15, "d", "assign", 1)]
    until = settled_at(events, 5.0, each_holds_one)
    assert until == 5.15
    found = pauses(events, 5.0, until, 3)
    assert round(found.unavailable, 6) == 0.1
    assert found.longest_unmoved == 0.0
    assert found.moved == 1


def test_a_partition_still_unowned_at_the_end_counts_until_then() -> None:
    events = [*START, ev(1.0, "a", "revoke", 0)]
    found = pauses(events, 0.5, 3.0, 3)
    assert (found.unavailable, found.longest_unmoved, found.moved) == (2.0, 0.0, 1)
    assert settled_at(events, 0.5, each_holds_one) is None


def test_timeline_wait_wakes_on_the_callback_that_satisfies_it() -> None:
    timeline = Timeline()
    for e in START:
        timeline.record(e.member, e.kind, e.partitions)
    timeline.wait(each_holds_one, 1.0, "already there")
    events = timeline.events()
    assert [(e.member, e.kind) for e in events] == [("a", "assign"), ("b", "assign"), ("c", "assign")]
    assert events[0].at <= events[1].at <= events[2].at
    timeline.record("c", "revoke", [2])
    try:
        timeline.wait(each_holds_one, 0.05, "c gave its partition up")
    except TimeoutError as exc:
        assert "c gave its partition up" in str(exc)
    else:
        raise AssertionError("wait returned although c holds nothing")
