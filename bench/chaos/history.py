"""The operation log of a chaos run: every client operation with its outcome and times.

A history is append-only and thread-safe (the workload's processes run on threads). Each
operation says who did it (``process``), what (``kind``), what it wrote and read (records with
topic, partition, value and, when known, offset), its outcome and when it started and ended.
It is written and read back as JSONL, one operation a line, so a failing run's history can be
kept and checked again (``python -m bench.chaos --check history.jsonl``).

Outcomes: ``ok`` (the client was told it happened), ``failed`` (it certainly did not happen:
a transaction whose abort succeeded), ``unknown`` (it may or may not have happened: a send that
got an error, a commit that timed out). The checker asks nothing of ``unknown`` operations
except what their effects, if seen, must obey.

Kinds:

``send``    one idempotent (non-transactional) write; ``writes`` holds it, with its offset when ok
``txn``     a transaction: its ``writes`` (offsets from the delivery reports), the records it
            consumed (``reads``, consume-transform-produce) and the consumer offsets it committed
            (``offsets``); ``txn_id`` is the transactional id
``poll``    records a consumer received; ``isolation`` and ``group``; ``session`` counts the
            consumer's assignments and seeks, so reads within one session are one continuous stream
``commit``  consumer offsets a group member committed (``offsets``)
``assign``  a consumer was assigned partitions (``offsets`` keys, positions unknown: -1)
``fault``   something the nemesis did (``info``), with its start and end
``election`` an unclean leader election the nemesis caused, as the cluster's state showed it:
            ``offsets`` maps the partition to the new leader's log end offset when it was elected
            (records at and above it were only on the replicas that lost the election), ``end``
            is when the new leader was in place, ``info`` names the old and the new leader
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterable, Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

OK, FAILED, UNKNOWN = "ok", "failed", "unknown"
OUTCOMES = (OK, FAILED, UNKNOWN)
KINDS = ("send", "txn", "poll", "commit", "assign", "fault", "election")


@dataclass(frozen=True)
class Rec:
    """One record: where it is and its value; ``offset`` None when the writer never learnt it."""

    topic: str
    partition: int
    value: str
    offset: int | None = None

    @property
    def tp(self) -> tuple[str, int]:
        return (self.topic, self.partition)


def tp_key(topic: str, partition: int) -> str:
    """How a partition is named in ``Op.offsets`` (JSON keys are strings)."""
    return f"{topic}/{partition}"


def parse_tp(key: str) -> tuple[str, int]:
    topic, _, partition = key.rpartition("/")
    return topic, int(partition)


@dataclass(frozen=True)
class Op:
    """One operation of the history; ``index`` is its place in the log (the order of invocation)."""

    index: int
    process: str
    kind: str
    outcome: str
    start: float
    end: float
    writes: tuple[Rec, ...] = ()
    reads: tuple[Rec, ...] = ()
    offsets: dict[str, int] = field(default_factory=dict)
    txn_id: str | None = None
    isolation: str | None = None
    group: str | None = None
    session: int | None = None
    info: str = ""

    def to_json(self) -> str:
        data = asdict(self)
        data["writes"] = [asdict(r) for r in self.writes]
        data["reads"] = [asdict(r) for r in self.reads]
        return json.dumps(data, sort_keys=True)

    @classmethod
    def from_json(cls, line: str) -> Op:
        data: dict[str, Any] = json.loads(line)
        data["writes"] = tuple(Rec(**r) for r in data.get("writes", ()))
        data["reads"] = tuple(Rec(**r) for r in data.get("reads", ()))
        op = cls(**data)
        if op.kind not in KINDS or op.outcome not in OUTCOMES:
            raise ValueError(f"operation {op.index}: kind {op.kind!r} or outcome {op.outcome!r} unknown")
        return op

    def describe(self) -> str:
        """One line for a report: the operation and what it wrote and read."""
        parts = [f"#{self.index} {self.process} {self.kind} {self.outcome}"]
        if self.txn_id:
            parts.append(f"txn={self.txn_id}")
        if self.writes:
            parts.append("wrote " + ", ".join(_rec_text(r) for r in self.writes[:8])
                         + (" ..." if len(self.writes) > 8 else ""))
        if self.reads:
            parts.append("read " + ", ".join(_rec_text(r) for r in self.reads[:8])
                         + (" ..." if len(self.reads) > 8 else ""))
        if self.offsets:
            parts.append(f"offsets={self.offsets}")
        if self.info:
            parts.append(self.info)
        return " ".join(parts)


def _rec_text(rec: Rec) -> str:
    at = "?" if rec.offset is None else str(rec.offset)
    return f"{rec.value}@{rec.topic}/{rec.partition}:{at}"


class History:
    """The append-only log; ``begin`` hands out an index (invocation order), ``record`` stores the op."""

    def __init__(self, clock: Any = time.monotonic) -> None:
        self._lock = threading.Lock()
        self._ops: list[Op] = []
        self._next = 0
        self.clock = clock

    def begin(self) -> tuple[int, float]:
        """Reserve the next index and note the start time of an operation being invoked."""
        with self._lock:
            index = self._next
            self._next += 1
        return index, self.clock()

    def record(self, index: int, start: float, process: str, kind: str, outcome: str,
               end: float | None = None, **fields: Any) -> Op:
        """Store an operation begun at ``start``; it ends now, or at ``end`` when it was observed before."""
        op = Op(index=index, process=process, kind=kind, outcome=outcome, start=start,
                end=self.clock() if end is None else end, **fields)
        with self._lock:
            self._ops.append(op)
        return op

    def add(self, process: str, kind: str, outcome: str, **fields: Any) -> Op:
        """An instantaneous operation (begin and record at once)."""
        index, start = self.begin()
        return self.record(index, start, process, kind, outcome, **fields)

    @property
    def ops(self) -> list[Op]:
        """The operations so far, in invocation order."""
        with self._lock:
            return sorted(self._ops, key=lambda op: op.index)

    def __iter__(self) -> Iterator[Op]:
        return iter(self.ops)

    def __len__(self) -> int:
        with self._lock:
            return len(self._ops)

    def dump(self, path: str | Path) -> None:
        dump(self.ops, path)


def dump(ops: Iterable[Op], path: str | Path) -> None:
    """Write operations as JSONL, one a line, for :func:`load`."""
    Path(path).write_text("".join(op.to_json() + "\n" for op in ops))


def load(path: str | Path) -> list[Op]:
    """The operations of a history written by :meth:`History.dump`."""
    return [Op.from_json(line) for line in Path(path).read_text().splitlines() if line.strip()]


def ops_of(history: History | Iterable[Op]) -> list[Op]:
    return history.ops if isinstance(history, History) else sorted(history, key=lambda op: op.index)
