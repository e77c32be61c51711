"""A leader's bookkeeping of its followers: caught-up times, the high watermark, ISR changes."""

from __future__ import annotations

from minikafka.broker.cluster.replica_tracking import LeaderReplicas

LAG = 30_000


def leader(isr: tuple[int, ...] = (1, 2, 3), leo: int = 100, hw: int = 90, min_isr: int = 2,
           now: int = 1_000) -> LeaderReplicas:
    return LeaderReplicas(1, (1, 2, 3), isr, leader_log_end_offset=leo, high_watermark=hw, now_ms=now,
                          lag_time_max_ms=LAG, min_insync_replicas=min_isr)


def test_a_new_leaders_high_watermark_waits_until_every_isr_follower_has_fetched() -> None:
    state = leader()
    assert not state.maybe_increment_high_watermark(100, {1, 2, 3}, 1_000)
    state.follower_fetched(2, 100, 0, 100, 1_001)
    assert not state.maybe_increment_high_watermark(100, {1, 2, 3}, 1_001)  # 3 has not fetched yet
    state.follower_fetched(3, 95, 0, 100, 1_002)
    assert state.maybe_increment_high_watermark(100, {1, 2, 3}, 1_002)
    assert state.high_watermark == 95
    state.follower_fetched(3, 100, 0, 100, 1_003)
    assert state.maybe_increment_high_watermark(100, {1, 2, 3}, 1_003) and state.high_watermark == 100


def test_the_high_watermark_never_moves_back() -> None:
    state = leader(hw=100)
    state.follower_fetched(2, 100, 0, 100, 1_001)
    state.follower_fetched(3, 80, 0, 100, 1_001)
    assert not state.maybe_increment_high_watermark(100, {1, 2, 3}, 1_001)
    assert state.high_watermark == 100


def test_below_min_isr_the_high_watermark_is_frozen_whatever_the_followers_have() -> None:
    state = leader(isr=(1,), min_isr=2)
    state.follower_fetched(2, 100, 0, 100, 1_001)
    assert state.below_min_isr()
    assert not state.maybe_increment_high_watermark(100, {1, 2, 3}, 1_001)
    assert state.high_watermark == 90


def test_min_isr_above_the_replication_factor_is_capped_by_it() -> None:
    state = LeaderReplicas(1, (1,), (1,), leader_log_end_offset=10, high_watermark=0, now_ms=0,
                           lag_time_max_ms=LAG, min_insync_replicas=2)
    assert state.effective_min_isr == 1
    assert state.maybe_increment_high_watermark(10, {1}, 0) and state.high_watermark == 10


def test_a_caught_up_follower_outside_the_isr_holds_the_high_watermark_back() -> None:
    state = leader(isr=(1, 2), hw=90)
    state.follower_fetched(2, 100, 0, 100, 1_001)
    state.follower_fetched(3, 100, 0, 100, 1_001)  # caught up, so it counts, at 100
    assert state.maybe_increment_high_watermark(105, {1, 2, 3}, 1_001)
    assert state.high_watermark == 100
    assert state.to_add({1, 2, 3}) == [3]
    assert state.to_add({1, 2}) == []  # only eligible brokers join


def test_an_isr_member_that_stops_fetching_leaves_after_the_lag_time() -> None:
    state = leader(now=0)
    state.follower_fetched(2, 100, 0, 100, 0)
    state.follower_fetched(3, 100, 0, 100, 0)
    assert state.to_remove(120, LAG) == []
    state.follower_fetched(2, 120, 0, 120, LAG)  # 2 keeps up, 3 is silent
    assert state.to_remove(120, LAG + 1) == [3]
    state.pending_isr = (1, 2)
    assert state.to_remove(120, LAG + 1) == []  # one change at a time
    state.confirmed((1, 2))
    assert state.isr == (1, 2) and state.pending_isr is None


def test_a_follower_that_fetches_but_never_reaches_the_end_falls_out() -> None:
    state = leader(now=0)
    # each fetch reaches what the leader had at the previous fetch, never what it has now
    state.follower_fetched(2, 100, 0, 110, 0)
    state.follower_fetched(2, 110, 0, 120, 20_000)  # it had at 20 s what the leader had at 0 s
    assert state.caught_up(2, 120, LAG) and not state.caught_up(2, 120, LAG + 1)
    state.follower_fetched(2, 120, 0, 130, 25_000)
    assert state.caught_up(2, 130, 20_000 + LAG) and not state.caught_up(2, 130, 20_001 + LAG)


def test_a_follower_joins_only_past_the_start_of_the_leaders_epoch() -> None:
    state = leader(isr=(1, 2), leo=100, hw=50)
    state.follower_fetched(3, 60, 0, 100, 1_001)
    assert state.to_add({1, 2, 3}) == []  # past the high watermark, not past the epoch start (100)
    state.follower_fetched(3, 100, 0, 100, 1_002)
    assert state.to_add({1, 2, 3}) == [3]


def test_pending_additions_count_for_the_high_watermark_and_acks_all() -> None:
    state = leader(isr=(1,), min_isr=2, hw=100)
    assert not state.acks_all_outcome()
    state.pending_isr = (1, 2)
    assert state.maximal_isr == (1, 2) and state.acks_all_outcome()
    assert state.below_min_isr()  # the committed ISR decides whether the high watermark may move
