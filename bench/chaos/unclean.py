"""Unclean leader elections in a chaos history, and which anomalies they explain.

An unclean election makes a replica that was out of sync the leader: the records above its log
end were only on the replicas that lost the election, and they are gone from the partition
(the old leader truncates to the new one when it comes back), acknowledged or not; new records
then take their offsets. The nemesis records each such election as an ``election`` operation,
from the cluster's own state (:class:`bench.chaos.nemesis.ClusterTarget`), with the new leader's
log end offset when it was elected.

An anomaly is explained by an election when every log position it is about lies at or above that
election's log end on its partition, and an operation showing it began before the new leader was
in place (a record written, or read, while the old leader still held it). Anything else is an
anomaly: a record below the new leader's log end was on the new leader, and must survive.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from bench.chaos.history import Op, parse_tp

TP = tuple[str, int]


@dataclass(frozen=True)
class Election:
    """One unclean election: its operation's index, the partition, the new leader's log end then
    (the first offset only the losers had) and when the new leader was in place."""

    index: int
    tp: TP
    new_leader_end: int
    at: float


def elections(ops: Iterable[Op]) -> list[Election]:
    return [Election(op.index, parse_tp(key), end, op.end)
            for op in ops if op.kind == "election" for key, end in op.offsets.items()]


def explaining(positions: Sequence[tuple[TP, int]], ops: Sequence[Op],
               found: Sequence[Election]) -> Election | None:
    """The election that explains an anomaly about ``positions`` shown by ``ops``, or None."""
    if not positions or not ops or not found:
        return None
    began = min(op.start for op in ops)
    first: Election | None = None
    for tp, offset in positions:
        election = next((e for e in found if e.tp == tp and offset >= e.new_leader_end and began <= e.at), None)
        if election is None:
            return None
        first = first or election
    return first
