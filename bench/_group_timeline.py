"""Who owns each partition of a consumer group over time, from its members' rebalance callbacks.

A rebalance protocol is judged by how long partitions go without a consuming owner, not only by
when the group settles: the classic eager protocol revokes every partition of every member for
the whole rebalance, while cooperative-sticky and KIP-848 pause only the partitions that move.
The callbacks (on_assign, on_revoke, on_lost) are where a member starts and stops consuming, so
each is logged with its ``time.monotonic()`` and the log is replayed to find the pauses.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass

Layout = dict[str, frozenset[int]]  # member name -> partitions it holds


@dataclass(frozen=True)
class Event:
    at: float  # time.monotonic() when the callback began
    member: str
    kind: str  # "assign" adds partitions; "revoke" and "lost" take them away
    partitions: frozenset[int]


@dataclass(frozen=True)
class Pauses:
    unavailable: float  # seconds without an owner, summed over every partition
    longest_unmoved: float  # the longest pause of a partition that ends with the owner it had before
    moved: int  # partitions whose owner changed


def replay(events: Iterable[Event], layout: Layout | None = None) -> Layout:
    """The partitions each member holds after ``events`` (applied to ``layout``)."""
    held = dict(layout or {})
    for e in events:
        mine = held.get(e.member, frozenset())
        held[e.member] = mine | e.partitions if e.kind == "assign" else mine - e.partitions
    return {m: ps for m, ps in held.items() if ps}


def settled_at(events: list[Event], since: float, done: Callable[[Layout], bool]) -> float | None:
    """The time of the first event at or after ``since`` after which ``done(layout)`` holds."""
    layout = replay(e for e in events if e.at < since)
    for e in events:
        if e.at < since:
            continue
        layout = replay([e], layout)
        if done(layout):
            return e.at
    return None


def owners(layout: Layout) -> dict[int, frozenset[str]]:
    found: dict[int, set[str]] = {}
    for member, partitions in layout.items():
        for p in partitions:
            found.setdefault(p, set()).add(member)
    return {p: frozenset(ms) for p, ms in found.items()}


def pauses(events: list[Event], since: float, until: float, partitions: int) -> Pauses:
    """Partition pauses between ``since`` and ``until`` (a partition is paused while no member holds it)."""
    layout = replay(e for e in events if e.at < since)
    before = owners(layout)
    count = {p: len(before.get(p, ())) for p in range(partitions)}
    paused_since = {p: since for p in range(partitions) if count[p] == 0}
    spans: dict[int, list[float]] = {p: [] for p in range(partitions)}
    for e in events:
        if not since <= e.at <= until:
            continue
        for p in e.partitions:
            held = p in layout.get(e.member, frozenset())
            if e.kind == "assign" and not held:
                count[p] += 1
                if count[p] == 1:
                    spans[p].append(e.at - paused_since.pop(p))
            elif e.kind != "assign" and held:
                count[p] -= 1
                if count[p] == 0:
                    paused_since[p] = e.at
        layout = replay([e], layout)
    for p, started in paused_since.items():
        spans[p].append(until - started)
    after = owners(layout)
    moved = {p for p in range(partitions) if before.get(p) != after.get(p)}
    unmoved = [s for p in range(partitions) if p not in moved for s in spans[p]]
    return Pauses(sum(s for ss in spans.values() for s in ss), max(unmoved, default=0.0), len(moved))


class Timeline:
    """The callbacks of one group's members, logged from their polling threads."""

    def __init__(self) -> None:
        self._events: list[Event] = []
        self._changed = threading.Condition()

    def record(self, member: str, kind: str, partitions: Iterable[int]) -> None:
        with self._changed:  # the time is taken under the lock, so the log is in time order
            self._events.append(Event(time.monotonic(), member, kind, frozenset(partitions)))
            self._changed.notify_all()

    def events(self) -> list[Event]:
        with self._changed:
            return list(self._events)

    def wait(self, done: Callable[[Layout], bool], timeout: float, what: str) -> None:
        """Block until ``done(current layout)``; TimeoutError after ``timeout`` seconds."""
        deadline = time.monotonic() + timeout
        with self._changed:
            while not done(replay(self._events)):
                left = deadline - time.monotonic()
                if left <= 0:
                    raise TimeoutError(f"{what}: layout {sorted(replay(self._events).items())}")
                self._changed.wait(left)
