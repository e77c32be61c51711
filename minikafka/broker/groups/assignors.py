"""The server-side assignors of KIP-848 consumer groups: ``uniform`` (the default) and ``range``.

The coordinator, not a member, computes each member's *target* partitions whenever the group
epoch moves past the assignment epoch; reconciliation (:mod:`.reconciliation`) then moves every
member to its target without a partition ever being owned twice. Both assignors follow Kafka's
(https://github.com/apache/kafka/tree/trunk/group-coordinator/src/main/java/org/apache/kafka/coordinator/group/assignor):

- ``uniform``: balanced (members' counts differ by at most one) and sticky: a member keeps as much
  of its previous target as its quota allows. When every member subscribes to the same topics the
  quota is global (``UniformHomogeneousAssignmentBuilder``); otherwise each unassigned partition
  goes to the least-loaded subscriber of its topic and partitions then move from the most- to the
  least-loaded subscribers of a topic (``UniformHeterogeneousAssignmentBuilder``).
- ``range``: per topic, the subscribers sorted (static members by instance id first, then the
  others by member id) each take a contiguous range, the first ``partitions % n`` one more. It
  ignores the previous target; it is deterministic, so the same members get the same ranges.

Member and topic iteration orders are sorted (Kafka's are hash-map orders), so results are
reproducible; they may differ from a Kafka broker's in which member gets which partitions.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass

from minikafka.broker.groups.consumer_records import Assignment
from minikafka.config import CONSUMER_ASSIGNORS

ASSIGNORS = CONSUMER_ASSIGNORS  # the names group.consumer.assignors may list

TopicPartition = tuple[uuid.UUID, int]


@dataclass(frozen=True, slots=True)
class AssignorMember:
    member_id: str
    instance_id: str | None
    topics: frozenset[uuid.UUID]  # subscribed topic ids that exist
    target: Assignment  # the current target


def _as_assignment(partitions: list[TopicPartition]) -> Assignment:
    out: dict[uuid.UUID, set[int]] = {}
    for tid, p in partitions:
        out.setdefault(tid, set()).add(p)
    return {tid: frozenset(ps) for tid, ps in out.items()}


def _kept(member: AssignorMember, topics: dict[uuid.UUID, int]) -> list[TopicPartition]:
    """The member's current target restricted to topics it still subscribes to and that exist."""
    return [(tid, p) for tid in sorted(member.target) if tid in member.topics
            for p in sorted(member.target[tid]) if p < topics.get(tid, 0)]


def assign(name: str, members: list[AssignorMember], topics: dict[uuid.UUID, int]) -> dict[str, Assignment]:
    """Every member's new target (``topics``: topic id -> partition count)."""
    if not members:
        return {}
    if name == "range":
        return _range(members, topics)
    ordered = sorted(members, key=lambda m: m.member_id)
    if len({m.topics for m in ordered}) == 1:
        return _uniform_homogeneous(ordered, topics)
    return _uniform_heterogeneous(ordered, topics)


def _range(members: list[AssignorMember], topics: dict[uuid.UUID, int]) -> dict[str, Assignment]:
    ordered = sorted(members, key=lambda m: (m.instance_id is None, m.instance_id or "", m.member_id))
    out: dict[str, list[TopicPartition]] = {m.member_id: [] for m in ordered}
    for tid in sorted(topics):
        subscribers = [m for m in ordered if tid in m.topics]
        if not subscribers:
            continue
        quota, extra = divmod(topics[tid], len(subscribers))
        start = 0
        for i, member in enumerate(subscribers):
            size = quota + (1 if i < extra else 0)
            out[member.member_id] += [(tid, p) for p in range(start, start + size)]
            start += size
    return {mid: _as_assignment(tps) for mid, tps in out.items()}


def _uniform_homogeneous(members: list[AssignorMember], topics: dict[uuid.UUID, int]) -> dict[str, Assignment]:
    subscribed = sorted(tid for tid in members[0].topics if tid in topics)
    every = [(tid, p) for tid in subscribed for p in range(topics[tid])]
    min_quota, extra = divmod(len(every), len(members))
    out: dict[str, list[TopicPartition]] = {}
    taken: set[TopicPartition] = set()
    for member in members:
        kept = [tp for tp in _kept(member, topics) if tp not in taken]
        quota = min_quota
        if len(kept) > min_quota and extra > 0:
            quota += 1  # it keeps one of the extra partitions
            extra -= 1
        out[member.member_id] = kept[:quota]
        taken.update(kept[:quota])
    unassigned = [tp for tp in every if tp not in taken]
    for member in members:  # fill up to the minimum quota
        mine = out[member.member_id]
        while len(mine) < min_quota and unassigned:
            mine.append(unassigned.pop(0))
    for member in members:  # the remaining extras, one each
        if not unassigned or extra <= 0:
            break
        mine = out[member.member_id]
        if len(mine) == min_quota:
            mine.append(unassigned.pop(0))
            extra -= 1
    return {mid: _as_assignment(tps) for mid, tps in out.items()}


def _uniform_heterogeneous(members: list[AssignorMember], topics: dict[uuid.UUID, int]) -> dict[str, Assignment]:
    out: dict[str, list[TopicPartition]] = {m.member_id: _kept(m, topics) for m in members}
    owner = {tp: mid for mid, tps in out.items() for tp in tps}
    subscribers = {tid: [m.member_id for m in members if tid in m.topics] for tid in topics}
    # topics with the most partitions per subscriber first, then fewer subscribers, then id
    order = sorted((tid for tid in topics if subscribers[tid]),
                   key=lambda t: (-topics[t] / len(subscribers[t]), len(subscribers[t]), t))
    for tid in order:
        for p in range(topics[tid]):
            if (tid, p) not in owner:
                mid = min(subscribers[tid], key=lambda m: (len(out[m]), m))
                out[mid].append((tid, p))
                owner[(tid, p)] = mid
    for tid in order:  # move partitions of a topic from the most- to the least-loaded subscriber
        for _ in range(topics[tid]):
            most = max(subscribers[tid], key=lambda m: (len(out[m]), m))
            least = min(subscribers[tid], key=lambda m: (len(out[m]), m))
            movable = [tp for tp in out[most] if tp[0] == tid]
            if len(out[most]) - len(out[least]) <= 1 or not movable:
                break
            out[most].remove(movable[-1])
            out[least].append(movable[-1])
    return {mid: _as_assignment(tps) for mid, tps in out.items()}
