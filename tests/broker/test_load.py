"""A bounded load run (the small variant of ``bench/load.py``): 100 connections, 1,000 idempotent
producer ids, 5 s, with slow readers and slowloris clients alongside, against ``minikafka serve``.

No errors, every acknowledged batch stored exactly once at its acknowledged offset, retries
answered from the duplicate cache, resident memory bounded, nobody starved, and the hostile
connections dropped by the broker (connections.max.idle.ms).
"""

from __future__ import annotations

from dataclasses import asdict

import pytest

from bench._serve import serve
from bench.load import LoadConfig, new_event_loop, run


@pytest.mark.timeout(180)
def test_small_load_run_loses_and_duplicates_nothing_and_stays_bounded() -> None:
    cfg = LoadConfig(connections=100, producers=1000, seconds=5, slow_readers=3, slowloris=10)
    with serve("--config", "connections.max.idle.ms=2000") as (bootstrap, proc, _directory):
        loop = new_event_loop()
        try:
            result = loop.run_until_complete(run(bootstrap, cfg, proc.pid))
        finally:
            loop.close()
    summary = asdict(result)
    assert result.errors == {}, summary
    assert result.batches_acked > 1000, summary
    assert result.stored_batches == result.batches_acked, summary
    assert (result.lost_batches, result.duplicated_batches, result.misplaced_batches, result.unexpected_batches) == (
        0, 0, 0, 0), summary
    assert result.duplicate_retries > 0 and result.duplicate_mismatches == 0, summary
    # nobody starved: every connection got at least a fifth of the average share
    assert result.slowest_connection_batches * 5 >= result.batches_acked / cfg.connections, summary
    assert result.latency_ms_p99 < 2000, summary
    assert result.hostile_closed_by_broker == result.hostile_total, summary
    assert 0 < result.rss_mb_peak < 400, summary
