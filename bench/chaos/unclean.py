"""Unclean leader elections in a chaos history, and which anomalies they explain.

An unclean election makes a replica that was out of sync the leader: the records above its log
end were only on the replicas that lost the election, and they are gone from the partition
(the old leader truncates to the new one when it comes back), acknowledged or not; new records
then take their offsets. The nemesis records each such election as an ``election`` operation,
from the cluster's own state (:class:`bench.chaos.nemesis.ClusterTarget`), with the new leader's
log end offset when it was elected.

An anomaly is explained by an election when every log position it is about lies at or above that
election's log end on its partition, and an operation showing it began before the new leader was
in place, or one of its positions was written or read before (a record the old leader held: a
group may commit an offset after the election that it read up to before). Anything else is an
anomaly: a record below the new leader's log end was on the new leader, and must survive. The
positions of each kind (:mod:`bench.chaos.checker`):

- lost write: the record acknowledged; inconsistent offset: the offset read twice;
- non-atomic transaction: its records not seen;
- non-monotonic poll: the offset read before the step back; non-monotonic send: the producer's
  write before the step back (both read from, or written to, the old leader);
- skipped offset: the offsets skipped (the offsets read on either side date the reads);
- offset regression: the record before the offset committed first (a commit of ``n`` says the
  group consumed ``n - 1``).

A lost *transaction marker* explains more: a transaction's record survived (the new leader had
it), its end marker, somewhere after it, did not, so the new leader held the transaction open and
the producer's next end marker on the partition decided it, perhaps the other way. Then an
aborted read, or a read_committed consumer that passed over the record while it was aborted (or
read it committed while another passes over it now), is explained when the marker had been
written (the abort answered; the record passed over or read committed) before an unclean election
of the partition whose new leader's log ended after the record, and no record written after that
lies between the two (it would prove the marker below the new leader's log end).

A librdkafka consumer passes over records the new leader kept: it validates the position it
fetches from, not the one it has handed over, so when it had fetched ahead into the records only
the old leader had, the new leader answers that their epoch ended at its log end, and the client
seeks there, dropping what it had fetched and not handed over below it. Such a skip is explained
when the consumer resumed at the first record at or above the new leader's log end, having read
before the election.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from bench.chaos.history import Op, parse_tp

TP = tuple[str, int]


@dataclass(frozen=True)
class Election:
    """One unclean election: its operation's index, the partition, the new leader's log end then
    (the first offset only the losers had), when the new leader was in place and the last time
    the old one was seen leading (``before``)."""

    index: int
    tp: TP
    new_leader_end: int
    at: float
    before: float


def elections(ops: Iterable[Op]) -> list[Election]:
    return [Election(op.index, parse_tp(key), end, op.end, op.start)
            for op in ops if op.kind == "election" for key, end in op.offsets.items()]


def first_seen(ops: Iterable[Op]) -> dict[tuple[TP, int], float]:
    """When each log position was first written to (an acknowledged write's offset) or read from:
    the start of the earliest operation that did."""
    out: dict[tuple[TP, int], float] = {}
    for op in ops:
        for rec in (*op.writes, *op.reads):
            if rec.offset is not None:
                key = (rec.tp, rec.offset)
                out[key] = min(out.get(key, op.start), op.start)
    return out


def explaining(positions: Sequence[tuple[TP, int]], ops: Sequence[Op], found: Sequence[Election],
               seen: dict[tuple[TP, int], float], read_at: Sequence[tuple[TP, int]] = ()) -> Election | None:
    """The election that explains an anomaly about ``positions`` shown by ``ops``, or None: each
    position lies at or above its log end, and one of them, or of the positions ``read_at`` in
    showing it, was written or read (or the anomaly's first operation began) before it; ``seen`` is
    :func:`first_seen` of the history. (A consumer's poll may hand over records it fetched from the
    old leader before the election.)"""
    if not positions or not ops or not found:
        return None
    since = min([op.start for op in ops] + [seen[p] for p in (*positions, *read_at) if p in seen])
    first: Election | None = None
    for tp, offset in positions:
        election = next((e for e in found if e.tp == tp and offset >= e.new_leader_end and since <= e.at), None)
        if election is None:
            return None
        first = first or election
    return first


def explaining_marker(positions: Sequence[tuple[TP, int]], decided: float, found: Sequence[Election],
                      ops: Sequence[Op]) -> Election | None:
    """The election that explains an anomaly about records of transactions at ``positions``,
    whose end markers had been written by ``decided``, by the loss of those markers alone; or None
    (see the module doc)."""
    first: Election | None = None
    for tp, offset in positions:
        election = next((e for e in found if e.tp == tp and decided <= e.at and offset < e.new_leader_end
                         and not _written_between(ops, tp, offset, e.new_leader_end, decided)), None)
        if election is None:
            return None
        first = first or election
    return first


def explaining_fetch_truncation(positions: Sequence[tuple[TP, int]], read_at: Sequence[tuple[TP, int]],
                                ops: Sequence[Op], found: Sequence[Election]) -> Election | None:
    """The election that explains a consumer passing over ``positions`` between its reads at
    ``read_at`` (the offset before and the one after), shown by ``ops``, as a librdkafka consumer
    truncating its fetch position to the new leader's log end (see the module doc): it read
    before the election and after it began, every position passed over lies below that log end,
    and it resumed at or above it; or None."""
    if len(read_at) != 2 or not positions or not ops:
        return None
    (tp, _), (_, resumed) = read_at
    highest = max(offset for _, offset in positions)
    began, ended = min(op.start for op in ops), max(op.end for op in ops)
    return next((e for e in found if e.tp == tp and highest < e.new_leader_end <= resumed
                 and began <= e.at and ended >= e.before), None)


def _written_between(ops: Sequence[Op], tp: TP, low: int, high: int, since: float) -> bool:
    """Whether an operation begun at or after ``since`` wrote to ``tp`` between ``low`` and ``high``
    (exclusive): appended after a marker written before ``since``, it proves that marker below it."""
    return any(rec.tp == tp and rec.offset is not None and low < rec.offset < high
               for op in ops if op.kind in ("send", "txn") and op.start >= since for rec in op.writes)
