"""Broker counters, kept as plain numbers so the hot path pays one attribute increment.

The admin endpoint renders them in Prometheus text format.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any


@dataclass
class RequestStats:
    count: int = 0
    seconds: float = 0.0


@dataclass
class Metrics:
    requests: dict[str, RequestStats] = field(default_factory=lambda: defaultdict(RequestStats))
    bytes_in: int = 0
    bytes_out: int = 0
    connections_active: int = 0
    connections_total: int = 0
    records_appended: int = 0
    batches_appended: int = 0
    snapshots_written: int = 0
    recovery_seconds: float = 0.0

    def observe_request(self, api: str, seconds: float, size: int) -> None:
        stats = self.requests[api]
        stats.count += 1
        stats.seconds += seconds
        self.bytes_in += size

    def count_snapshots(self, producer_state: Any) -> None:
        """Count the snapshot files ``producer_state`` writes from now on in ``snapshots_written``.

        The producer-state manager keeps no such count itself, so its ``take_snapshot`` is wrapped
        (once per manager) when the broker attaches the log.
        """
        take = producer_state.take_snapshot
        if getattr(take, "counted_by", None) is self:
            return

        def counted(*args: Any, **kwargs: Any) -> Any:
            path = take(*args, **kwargs)
            if path is not None:
                self.snapshots_written += 1
            return path

        counted.counted_by = self  # type: ignore[attr-defined]
        producer_state.take_snapshot = counted
