"""The wall clock every component defaults to; each takes a clock argument so tests inject their own."""

from __future__ import annotations

import time


def wall_clock_ms() -> int:
    """Milliseconds since the epoch, as Kafka's ``Time.SYSTEM.milliseconds()``."""
    return time.time_ns() // 1_000_000
