"""Broker counters, kept as plain numbers so the hot path pays one attribute increment.

The admin endpoint renders them in Prometheus text format.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field


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

    def snapshot_written(self) -> None:
        """A partition log wrote a producer snapshot file (wired to each log when it opens)."""
        self.snapshots_written += 1
