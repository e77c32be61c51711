"""What a partition's leader knows of its followers: how far each has fetched, whether it is caught
up, where the high watermark may move, and which replicas should join or leave the ISR.

A follower's fetch offset is its log end offset. It is caught up when it has fetched everything
the leader had, or did so within ``replica.lag.time.max.ms``; an ISR member that is not caught up
is dropped (checked every half lag time), and a follower that has reached the high watermark and
the start of the leader's epoch joins. The high watermark is the smallest log end offset among
the leader and the followers that count (the ISR, pending additions included, and any caught-up
follower), never moves back, and does not move at all while the ISR is smaller than
``min(min.insync.replicas, replication factor)``. A new leader knows nothing of its followers' logs
until each has fetched once, so its high watermark waits for them.

Kafka: ``Replica.updateFetchStateOrThrow``, ``Partition.maybeIncrementLeaderHW``,
``Partition.maybeExpandIsr`` / ``maybeShrinkIsr``,
https://github.com/apache/kafka/blob/trunk/core/src/main/scala/kafka/cluster/Replica.scala,
https://github.com/apache/kafka/blob/trunk/core/src/main/scala/kafka/cluster/Partition.scala.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import dataclass

UNKNOWN_OFFSET = -1


@dataclass
class FollowerProgress:
    """The leader's view of one follower (Kafka: ``ReplicaState``)."""

    node_id: int
    log_end_offset: int = UNKNOWN_OFFSET
    log_start_offset: int = UNKNOWN_OFFSET
    last_fetch_leader_log_end_offset: int = UNKNOWN_OFFSET
    last_fetch_time_ms: int = 0
    last_caught_up_time_ms: int = 0


class LeaderReplicas:
    """One partition's followers as its leader tracks them, from the moment it became leader."""

    def __init__(self, leader_id: int, replicas: Sequence[int], isr: Sequence[int], *, leader_log_end_offset: int,
                 high_watermark: int, now_ms: int, lag_time_max_ms: int, min_insync_replicas: int) -> None:
        self.leader_id = leader_id
        self.replicas = tuple(replicas)
        self.isr = tuple(isr)  # as the controller last confirmed it
        self.pending_isr: tuple[int, ...] | None = None  # asked of the controller, not yet confirmed
        self.high_watermark = high_watermark
        #: the leader's log end when it became leader: a follower joins the ISR only past it
        self.epoch_start_offset = leader_log_end_offset
        self.lag_time_max_ms = lag_time_max_ms
        self.min_insync_replicas = min_insync_replicas
        self.followers = {r: FollowerProgress(r, last_caught_up_time_ms=now_ms if r in self.isr else 0)
                          for r in self.replicas if r != leader_id}

    # ----------------------------------------------------------------- fetches
    def follower_fetched(self, node_id: int, fetch_offset: int, log_start_offset: int,
                         leader_log_end_offset: int, now_ms: int) -> None:
        """A follower's Fetch from ``fetch_offset`` (its log end), received at ``now_ms`` while the
        leader's log ended at ``leader_log_end_offset``."""
        f = self.followers[node_id]
        if fetch_offset >= leader_log_end_offset:
            f.last_caught_up_time_ms = max(f.last_caught_up_time_ms, now_ms)
        elif fetch_offset >= f.last_fetch_leader_log_end_offset:
            f.last_caught_up_time_ms = max(f.last_caught_up_time_ms, f.last_fetch_time_ms)
        f.last_fetch_leader_log_end_offset = max(f.last_fetch_leader_log_end_offset, leader_log_end_offset)
        f.last_fetch_time_ms = now_ms
        f.log_end_offset = fetch_offset
        f.log_start_offset = log_start_offset

    def caught_up(self, node_id: int, leader_log_end_offset: int, now_ms: int) -> bool:
        f = self.followers[node_id]
        return (f.log_end_offset == leader_log_end_offset
                or now_ms - f.last_caught_up_time_ms <= self.lag_time_max_ms)

    # ----------------------------------------------------------------- high watermark
    @property
    def maximal_isr(self) -> tuple[int, ...]:
        """The committed ISR with pending additions: what the high watermark must wait for."""
        if self.pending_isr is None:
            return self.isr
        return self.isr + tuple(r for r in self.pending_isr if r not in self.isr)

    @property
    def effective_min_isr(self) -> int:
        return min(self.min_insync_replicas, len(self.replicas))

    def below_min_isr(self) -> bool:
        return len(self.isr) < self.effective_min_isr

    def maybe_increment_high_watermark(self, leader_log_end_offset: int, eligible: Collection[int],
                                       now_ms: int) -> bool:
        """Move the high watermark up to where every replica that counts has its log; returns
        whether it moved. ``eligible``: brokers that are active (not fenced or shutting down)."""
        if self.below_min_isr():
            return False
        candidate = leader_log_end_offset
        maximal = self.maximal_isr
        for node_id, f in self.followers.items():
            counts = node_id in maximal or (node_id in eligible and self.caught_up(node_id, leader_log_end_offset,
                                                                                  now_ms))
            if counts:
                candidate = min(candidate, f.log_end_offset)
        if candidate > self.high_watermark:
            self.high_watermark = candidate
            return True
        return False

    def acks_all_outcome(self) -> bool:
        """Whether an acks=all write the high watermark passed may be answered without
        NOT_ENOUGH_REPLICAS_AFTER_APPEND: the ISR (with pending additions) meets the minimum."""
        return self.effective_min_isr <= len(self.maximal_isr)

    # ----------------------------------------------------------------- ISR changes
    def to_add(self, eligible: Collection[int]) -> list[int]:
        """Followers outside the ISR that may join it now."""
        if self.pending_isr is not None:
            return []
        return [r for r, f in self.followers.items()
                if r not in self.isr and r in eligible
                and f.log_end_offset >= self.high_watermark and f.log_end_offset >= self.epoch_start_offset]

    def to_remove(self, leader_log_end_offset: int, now_ms: int) -> list[int]:
        """ISR followers that have fallen behind for longer than the lag time."""
        if self.pending_isr is not None:
            return []
        return [r for r in self.isr if r != self.leader_id and not self.caught_up(r, leader_log_end_offset, now_ms)]

    def confirmed(self, isr: Sequence[int]) -> None:
        """The controller's answer to an ISR change (or a change it made itself)."""
        self.isr = tuple(isr)
        self.pending_isr = None
