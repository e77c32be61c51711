"""Anomalies in a chaos history, after Jepsen's Kafka queue checker; pure functions of the operations.

Each anomaly names the operations (their indexes in the history) that show it:

``lost-write``          an acknowledged write (an ok ``send``, a write of an ok transaction) that no
                        read_committed consumer read, though one drained every partition at the end;
                        or one acknowledged at an offset that was read holding another value
``duplicate``           one value read at two positions (the log holds it twice); or one consumed
                        record processed by two committed consume-transform-produce transactions
``inconsistent-offset`` two values read at the same partition and offset
``aborted-read``        a read_committed consumer read a record of a transaction whose abort succeeded
``non-atomic``          some but not all of a committed transaction's records seen by read_committed
                        consumers
``nonmonotonic-poll``   one consumer, in one continuous session on a partition, read an offset at or
                        below the one it read before
``skipped-offset``      one consumer, in one session on a partition, read offsets a then b while a
                        record it should have read lies between (one some consumer of its isolation
                        level read: for read_committed that proves it committed)
``nonmonotonic-send``   one producer's writes to a partition, in the order it made them, were given
                        offsets that do not increase (idempotent producers keep their order)
``offset-regression``   a group's committed offset for a partition went backwards: an ok commit below
                        one that had finished before it started, or a member that, newly assigned a
                        partition, read from below an offset the group had committed before
``txn-cycle``           transactions that must each have committed before another in a cycle

*Transaction cycles.* Jepsen's Kafka checker builds dependency graphs between transactions and
looks for cycles: G0 (write-write only) and G1c (with write-read edges). Kafka's queue model
makes most of its write-write edges unsound here: a transaction's records are appended when sent,
not when it commits, so two open transactions writing the same two partitions may interleave in
opposite orders in each, and Kafka promises nothing else (Jepsen reports such G0 cycles in Kafka
itself). So offset order per partition is **not** taken as an order of transactions, and G0 is
not reported. What the history does prove is commit order, and a cycle in it is impossible:

- *write-read*: a transaction that consumed (read_committed) a record another transaction wrote
  ran after that one committed, so the writer committed first;
- *real time*: a transaction acknowledged as committed before another one began committed first.

A cycle in these edges (G1c with real-time edges; Elle's "G1c-realtime") is reported with its
transactions. Transactions count as committed when ok, or when unknown and a read_committed
consumer read one of their records; aborted ones are left out.

Lost writes assume the history ends with consumers reading every partition to its end (the
workload's drain).

*Unclean leader elections.* When the nemesis makes an out-of-sync replica the leader (it records
each such ``election`` with the new leader's log end, :mod:`bench.chaos.unclean`), the records
above that end were only on the replicas that lost: acknowledged or not, they are gone, and a new
record takes their offsets. Each anomaly names the log positions it is about (``positions``); one
whose positions all lie at or above the log end of an unclean election on their partition, shown
by operations that began before that election, is *explained* by it and counted apart
(:func:`examine`); any other is an anomaly as before. A transaction whose outcome is unknown counts
as committed when its records are read committed; if a read_committed consumer had passed over
those records while they were aborted, and a lost abort marker explains it, the transaction was
aborted in truth, and the records it consumed and that were consumed again are no duplicate.
"""

from __future__ import annotations

import bisect
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field

from bench.chaos import unclean
from bench.chaos.history import FAILED, OK, UNKNOWN, Op, Rec, parse_tp

READ_COMMITTED = "read_committed"
ANOMALY_KINDS = ("lost-write", "duplicate", "inconsistent-offset", "aborted-read", "non-atomic",
                 "nonmonotonic-poll", "skipped-offset", "nonmonotonic-send", "offset-regression",
                 "txn-cycle")


TP = tuple[str, int]


@dataclass(frozen=True)
class Anomaly:
    """One anomaly: what, in words, and the operations (history indexes) that show it;
    ``positions``: the log positions (partition, offset) whose records it is about, and
    ``decided`` (see below)."""

    kind: str
    message: str
    ops: tuple[int, ...]
    positions: tuple[tuple[TP, int], ...] = field(default=(), compare=False)
    #: for records of transactions (an aborted read, a skipped record): the time by which their
    #: transaction's end marker had been written (:func:`bench.chaos.unclean.explaining_marker`)
    decided: float | None = field(default=None, compare=False)
    #: other positions read in showing it: when their records were first seen dates the reads
    #: (a consumer hands over records it fetched earlier)
    read_at: tuple[tuple[TP, int], ...] = field(default=(), compare=False)


@dataclass
class Findings:
    """The checker's verdict: anomalies, and what unclean leader elections explain (each with
    the election's operation index)."""

    anomalies: list[Anomaly]
    explained: list[tuple[Anomaly, int]]


class _Index:
    """What the history wrote and read, looked up by value and by position."""

    def __init__(self, ops: list[Op]) -> None:
        self.ops = ops
        self.by_index = {op.index: op for op in ops}
        self.writer: dict[str, tuple[Op, Rec]] = {}
        self.reads: dict[str, list[tuple[Op, Rec]]] = defaultdict(list)
        self.rc_read_values: set[str] = set()
        for op in ops:
            for rec in op.writes:
                self.writer.setdefault(rec.value, (op, rec))
            for rec in op.reads:
                self.reads[rec.value].append((op, rec))
                if _isolation(op) == READ_COMMITTED:
                    self.rc_read_values.add(rec.value)
        self.committed_txns = [op for op in ops if op.kind == "txn" and self.committed(op)]

    def committed(self, op: Op) -> bool:
        """A transaction known to have committed: ok, or unknown with a record seen read_committed."""
        if op.outcome == OK:
            return True
        return op.outcome == UNKNOWN and any(w.value in self.rc_read_values for w in op.writes)


def _isolation(op: Op) -> str | None:
    """A transaction's reads are its consumer's: consume-transform-produce reads read_committed."""
    return op.isolation if op.kind == "poll" else (READ_COMMITTED if op.kind == "txn" else None)


def check(history: Iterable[Op]) -> list[Anomaly]:
    """Every anomaly of the history that no unclean leader election explains, grouped by kind in
    the order of :data:`ANOMALY_KINDS`."""
    return examine(history).anomalies


def examine(history: Iterable[Op]) -> Findings:
    """The anomalies of the history, those an unclean election explains set apart."""
    ops = sorted(history, key=lambda op: op.index)
    index = _Index(ops)
    found = [*lost_writes(index), *duplicates(index), *inconsistent_offsets(index), *aborted_reads(index),
             *non_atomic(index), *poll_order(index), *send_order(index), *offset_regressions(index),
             *txn_cycles(index)]
    elections = unclean.elections(ops)
    seen = unclean.first_seen(ops) if elections else {}
    findings = Findings([], [])
    passed_over: dict[tuple[TP, int], unclean.Election] = {}  # records a lost marker made visible
    for anomaly in sorted(found, key=lambda a: a.kind == "duplicate"):  # duplicates use passed_over
        shown_by = [index.by_index[i] for i in anomaly.ops]
        election = unclean.explaining(anomaly.positions, shown_by, elections, seen, anomaly.read_at)
        if election is None and anomaly.decided is not None:
            election = unclean.explaining_marker(anomaly.positions, anomaly.decided, elections, index.ops)
            if election is not None and anomaly.kind == "skipped-offset":
                passed_over.update((position, election) for position in anomaly.positions)
        if election is None and anomaly.kind == "skipped-offset":
            election = unclean.explaining_fetch_truncation(anomaly.positions, anomaly.read_at, shown_by, elections)
        if election is None and anomaly.kind == "duplicate":
            election = _aborted_in_truth(shown_by, index, passed_over)
        if election is None:
            findings.anomalies.append(anomaly)
        else:
            findings.explained.append((anomaly, election.index))
    order = {kind: i for i, kind in enumerate(ANOMALY_KINDS)}
    findings.anomalies.sort(key=lambda a: order[a.kind])
    findings.explained.sort(key=lambda entry: order[entry[0].kind])
    return findings


def _aborted_in_truth(txns: list[Op], index: _Index,
                      passed_over: dict[tuple[TP, int], unclean.Election]) -> unclean.Election | None:
    """For a record consumed by several transactions: the election, if all but one of them count as
    committed only because their records were read committed after a lost abort marker made them
    visible (a read_committed consumer had passed over those records while they were aborted)."""
    if not all(op.kind == "txn" for op in txns):
        return None
    election = None
    committed = 0
    for op in txns:
        seen = [(w.tp, w.offset) for w in op.writes if w.value in index.rc_read_values]
        if op.outcome == UNKNOWN and seen and all(position in passed_over for position in seen):
            election = passed_over[seen[0]]  # type: ignore[index]
        else:
            committed += 1
    return election if committed <= 1 else None


def lost_writes(index: _Index) -> list[Anomaly]:
    """Acknowledged writes a read_committed consumer never read (committed records are visible to
    read_committed: the drain reads them all), or read at another offset than acknowledged. A
    committed transaction seen in part is reported as non-atomic instead."""
    out = []
    at: dict[tuple[TP, int], tuple[Op, Rec]] = {}
    for reads in index.reads.values():
        for op, rec in reads:
            if rec.offset is not None:
                at.setdefault((rec.tp, rec.offset), (op, rec))
    for op in index.ops:
        if op.outcome != OK or op.kind not in ("send", "txn"):
            continue
        if op.kind == "txn" and any(w.value in index.rc_read_values for w in op.writes):
            unseen = []
        else:
            unseen = [rec for rec in op.writes if rec.value not in index.rc_read_values]
        for rec in unseen:
            also = " (read only read_uncommitted)" if rec.value in index.reads else ""
            out.append(Anomaly("lost-write", f"{rec.value} acknowledged in {rec.topic}/{rec.partition}"
                               f" at offset {rec.offset}, never read read_committed{also}", (op.index,),
                               _at(rec)))
        for rec in op.writes:
            if rec in unseen or rec.offset is None or (rec.tp, rec.offset) not in at:
                continue
            reader, found = at[rec.tp, rec.offset]
            if found.value != rec.value:
                out.append(Anomaly("lost-write", f"{rec.value} acknowledged at {rec.topic}/{rec.partition}"
                                   f":{rec.offset}, which was read holding {found.value}",
                                   (op.index, reader.index), _at(rec)))
    return out


def duplicates(index: _Index) -> list[Anomaly]:
    out = []
    for value, reads in index.reads.items():
        positions: dict[tuple[TP, int | None], Op] = {}
        for op, rec in reads:
            positions.setdefault((rec.tp, rec.offset), op)
        if len(positions) > 1:
            where = ", ".join(f"{tp[0]}/{tp[1]}:{off}" for tp, off in sorted(positions, key=str))
            out.append(Anomaly("duplicate", f"{value} read at {len(positions)} positions: {where}",
                               tuple(sorted({op.index for op in positions.values()}))))
    consumed_by: dict[str, list[Op]] = defaultdict(list)
    for op in index.committed_txns:
        for rec in {r.value: r for r in op.reads}.values():
            consumed_by[rec.value].append(op)
    commits = _commits(index)
    for value, txns in consumed_by.items():
        if len(txns) > 1:
            out.append(Anomaly("duplicate", f"{value} consumed by {len(txns)} committed transactions",
                               tuple(op.index for op in txns), _reconsumed_from(txns[-1], value, commits)))
    return out


def _reconsumed_from(txn: Op, value: str, commits: dict[tuple[str, TP], list[tuple[Op, int]]]) -> tuple[tuple[TP, int], ...]:
    """The position a group consuming ``value`` again had consumed up to before (its committed offset
    less one): if an unclean election dropped it, the group's position was out of range and reset."""
    rec = next(r for r in txn.reads if r.value == value)
    before = _CommittedBefore(commits.get((txn.group or "", rec.tp), []))(txn.start)
    return () if before is None or rec.offset is None or before[1] <= rec.offset else ((rec.tp, before[1] - 1),)


def inconsistent_offsets(index: _Index) -> list[Anomaly]:
    values: dict[tuple[TP, int], dict[str, Op]] = defaultdict(dict)
    for reads in index.reads.values():
        for op, rec in reads:
            if rec.offset is not None:
                values[rec.tp, rec.offset].setdefault(rec.value, op)
    return [Anomaly("inconsistent-offset", f"{tp[0]}/{tp[1]}:{offset} read as {', '.join(sorted(found))}",
                    tuple(sorted(op.index for op in found.values())), ((tp, offset),))
            for (tp, offset), found in sorted(values.items()) if len(found) > 1]


def _at(*recs: Rec) -> tuple[tuple[TP, int], ...]:
    """The log positions of records whose offsets are known."""
    return tuple((rec.tp, rec.offset) for rec in recs if rec.offset is not None)


def aborted_reads(index: _Index) -> list[Anomaly]:
    out = []
    for value in sorted(index.rc_read_values):
        writer = index.writer.get(value)
        if writer is None or writer[0].kind != "txn" or writer[0].outcome != FAILED:
            continue
        readers = sorted({op.index for op, _ in index.reads[value] if _isolation(op) == READ_COMMITTED})
        out.append(Anomaly("aborted-read", f"{value} of aborted transaction {writer[0].txn_id} read committed",
                           (writer[0].index, *readers), _at(writer[1]), decided=writer[0].end))
    return out


def non_atomic(index: _Index) -> list[Anomaly]:
    out = []
    for op in index.committed_txns:
        values = [w.value for w in op.writes]
        seen = [v for v in values if v in index.rc_read_values]
        if seen and len(seen) < len(values):
            missing = [v for v in values if v not in index.rc_read_values]
            readers = sorted({r.index for v in seen for r, _ in index.reads[v] if _isolation(r) == READ_COMMITTED})
            out.append(Anomaly("non-atomic", f"transaction {op.txn_id}: {', '.join(seen)} seen read_committed,"
                               f" {', '.join(missing)} not", (op.index, *readers),
                               _at(*(w for w in op.writes if w.value in missing))))
    return out


def poll_order(index: _Index) -> list[Anomaly]:
    """Non-monotonic and skipping reads within one consumer's session on one partition."""
    visible: dict[tuple[bool, TP], set[int]] = defaultdict(set)
    first_reader: dict[tuple[bool, TP, int], tuple[Op, Rec]] = {}
    streams: dict[tuple[str, int | None, TP], list[tuple[Op, Rec]]] = defaultdict(list)
    for op in index.ops:
        if op.kind != "poll":
            continue
        rc = op.isolation == READ_COMMITTED
        for rec in op.reads:
            if rec.offset is None:
                continue
            visible[False, rec.tp].add(rec.offset)
            first_reader.setdefault((False, rec.tp, rec.offset), (op, rec))
            if rc:
                visible[True, rec.tp].add(rec.offset)
                first_reader.setdefault((True, rec.tp, rec.offset), (op, rec))
            streams[op.process, op.session, rec.tp].append((op, rec))
    sorted_visible = {key: sorted(offsets) for key, offsets in visible.items()}
    out = []
    for (process, _session, tp), reads in streams.items():
        rc = reads[0][0].isolation == READ_COMMITTED
        known = sorted_visible.get((rc, tp), [])
        for (op_a, a), (op_b, b) in zip(reads, reads[1:], strict=False):
            assert a.offset is not None and b.offset is not None
            where = f"{process} on {tp[0]}/{tp[1]}"
            if b.offset <= a.offset:
                out.append(Anomaly("nonmonotonic-poll", f"{where} read offset {b.offset} ({b.value})"
                                   f" after {a.offset} ({a.value})", _pair(op_a, op_b), _at(a)))
                continue
            first = bisect.bisect_right(known, a.offset)
            if first < len(known) and known[first] < b.offset:
                skipped = known[first:bisect.bisect_left(known, b.offset)]
                witnesses = [first_reader[rc, tp, offset] for offset in skipped]  # reads of what was skipped
                transactional = all(index.writer.get(rec.value, (None,))[0] is not None
                                    and index.writer[rec.value][0].kind == "txn" for _, rec in witnesses)
                out.append(Anomaly("skipped-offset", f"{where} read offset {a.offset} then {b.offset},"
                                   f" skipping {_offsets_text(skipped)} (read by {witnesses[0][0].process})",
                                   _pair(op_a, op_b), tuple((tp, offset) for offset in skipped),
                                   decided=max(min(op_b.end, op.end) for op, _ in witnesses) if transactional
                                   else None, read_at=_at(a, b)))
    return out


def _pair(a: Op, b: Op) -> tuple[int, ...]:
    return (a.index,) if a.index == b.index else (a.index, b.index)


def _offsets_text(offsets: list[int]) -> str:
    return ", ".join(map(str, offsets[:10])) + (f" (+{len(offsets) - 10})" if len(offsets) > 10 else "")


def send_order(index: _Index) -> list[Anomaly]:
    last: dict[tuple[str, TP], tuple[Op, Rec]] = {}
    out = []
    for op in index.ops:
        if op.kind not in ("send", "txn"):
            continue
        for rec in op.writes:
            if rec.offset is None:
                continue
            key = (op.process, rec.tp)
            prev = last.get(key)
            if prev is not None and prev[1].offset is not None and rec.offset <= prev[1].offset:
                out.append(Anomaly("nonmonotonic-send", f"{op.process} wrote {rec.value} to {rec.topic}/"
                                   f"{rec.partition} at {rec.offset} after {prev[1].value} at {prev[1].offset}",
                                   _pair(prev[0], op), _at(prev[1])))
            last[key] = (op, rec)
    return out


def offset_regressions(index: _Index) -> list[Anomaly]:
    """Committed offsets per group and partition: never below one committed (ok) before."""
    commits = _commits(index)
    read_by: dict[tuple[str | None, TP], list[tuple[float, int]]] = defaultdict(list)  # a group's reads
    for op in index.ops:
        if op.kind in ("poll", "txn"):
            for rec in op.reads:
                if rec.offset is not None:
                    read_by[op.group, rec.tp].append((op.start, rec.offset))
    out = []
    for (group, tp), entries in commits.items():
        before_of = _CommittedBefore(entries)
        for op, offset in entries:
            before = before_of(op.start)
            if before is not None and offset < before[1]:
                # the group's last read below the offset it went back from, before committing it
                below = [o for start, o in read_by.get((group, tp), []) if start <= before[0].end and o < before[1]]
                out.append(Anomaly("offset-regression", f"group {group} committed {tp[0]}/{tp[1]} at {offset}"
                                   f" after {before[1]} had been committed", (before[0].index, op.index),
                                   ((tp, before[1] - 1),), read_at=((tp, max(below)),) if below else ()))
    out.extend(_assignment_regressions(index, commits))
    return out


def _commits(index: _Index) -> dict[tuple[str, TP], list[tuple[Op, int]]]:
    """The ok commits (and committed transactions' offsets) of each group and partition."""
    commits: dict[tuple[str, TP], list[tuple[Op, int]]] = defaultdict(list)
    for op in index.ops:
        if op.group and op.outcome == OK and op.kind in ("commit", "txn"):
            for key, offset in op.offsets.items():
                commits[op.group, parse_tp(key)].append((op, offset))
    return commits


class _CommittedBefore:
    """The highest offset among commits that ended before a given time (prefix maxima by end time)."""

    def __init__(self, entries: list[tuple[Op, int]]) -> None:
        by_end = sorted(entries, key=lambda entry: entry[0].end)
        self.ends = [op.end for op, _ in by_end]
        self.best: list[tuple[Op, int]] = []
        for entry in by_end:
            self.best.append(entry if not self.best or entry[1] > self.best[-1][1] else self.best[-1])

    def __call__(self, time: float) -> tuple[Op, int] | None:
        i = bisect.bisect_left(self.ends, time)
        return self.best[i - 1] if i > 0 else None


def _assignment_regressions(index: _Index, commits: dict[tuple[str, TP], list[tuple[Op, int]]]) -> list[Anomaly]:
    first_read: dict[tuple[str, int | None, TP], tuple[Op, Rec]] = {}
    for op in index.ops:
        if op.kind == "poll":
            for rec in op.reads:
                if rec.offset is not None:
                    first_read.setdefault((op.process, op.session, rec.tp), (op, rec))
    out = []
    for op in index.ops:
        if op.kind != "assign" or not op.group:
            continue
        for key in op.offsets:
            tp = parse_tp(key)
            read = first_read.get((op.process, op.session, tp))
            before = _CommittedBefore(commits.get((op.group, tp), []))(op.start)
            if read is not None and read[1].offset is not None and before is not None and read[1].offset < before[1]:
                out.append(Anomaly("offset-regression", f"{op.process} of group {op.group}, assigned {key},"
                                   f" read from {read[1].offset} below committed {before[1]}",
                                   (before[0].index, op.index, read[0].index), ((tp, before[1] - 1),)))
    return out


def txn_cycles(index: _Index) -> list[Anomaly]:
    """Cycles in the commit order that write-read and real-time edges prove (see the module doc)."""
    txns = index.committed_txns
    if not txns:
        return []
    edges: dict[int, set[int]] = defaultdict(set)  # nodes: op indexes of transactions, negative: barriers
    by_index = {op.index: op for op in txns}
    for op in txns:
        for rec in op.reads:
            writer = index.writer.get(rec.value)
            if writer is not None and writer[0].index in by_index and writer[0].index != op.index:
                edges[writer[0].index].add(op.index)
    # real time, in O(n log n): each ok transaction leads to a barrier at its end time; barriers
    # chain in time order, and each barrier leads to the transactions that start after it
    ends = sorted((op.end, op.index) for op in txns if op.outcome == OK)
    barrier = {idx: -(i + 1) for i, (_, idx) in enumerate(ends)}
    for i, (_, idx) in enumerate(ends):
        edges[idx].add(barrier[idx])
        if i + 1 < len(ends):
            edges[-(i + 1)].add(-(i + 2))
    end_times = [end for end, _ in ends]
    for op in txns:
        last_before = bisect.bisect_left(end_times, op.start) - 1
        if last_before >= 0:
            edges[-(last_before + 1)].add(op.index)
    out = []
    for component in _strongly_connected(edges):
        members = sorted(n for n in component if n >= 0)
        if len(component) > 1 and members:
            names = ", ".join(f"{by_index[n].txn_id}#{n}" for n in members[:10])
            out.append(Anomaly("txn-cycle", f"transactions each committed before another: {names}",
                               tuple(members)))
    return out


def _strongly_connected(edges: dict[int, set[int]]) -> list[list[int]]:
    """Tarjan's algorithm, iterative (histories are long)."""
    nodes = set(edges) | {m for targets in edges.values() for m in targets}
    order: dict[int, int] = {}
    low: dict[int, int] = {}
    stack: list[int] = []
    on_stack: set[int] = set()
    out: list[list[int]] = []
    for root in sorted(nodes):
        if root in order:
            continue
        work = [(root, iter(sorted(edges.get(root, ()))))]
        order[root] = low[root] = len(order)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in order:
                    order[child] = low[child] = len(order)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(edges.get(child, ())))))
                elif child in on_stack:
                    low[node] = min(low[node], order[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == order[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                out.append(component)
    return out
