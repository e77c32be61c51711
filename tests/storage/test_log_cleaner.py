"""The log cleaner over real partition directories: what is kept, what goes, and crash safety."""

from __future__ import annotations

import json
import random
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest

from minikafka.config import BrokerConfig
from minikafka.storage.batch import split_batches
from minikafka.storage.cleaner import CLEANER_CHECKPOINT, LogCleaner, cleanable
from minikafka.storage.log import PartitionLog
from tests.batches import batch_of_records
from tests.storage_helpers import TS, kafka_batches, make_batch, open_log, topic_config

COMPACT = {"cleanup_policy": "compact", "segment_bytes": 2000, "min_cleanable_dirty_ratio": 0.01}


def compact_config(**extra: Any) -> dict[str, Any]:
    settings = dict(COMPACT) | extra
    return topic_config(**settings)


def records(plog: PartitionLog) -> list[tuple[int, bytes | None, bytes | None]]:
    """``(offset, key, value)`` of every record from the log start, as a consumer reads them."""
    out: list[tuple[int, bytes | None, bytes | None]] = []
    offset = plog.log_start_offset
    while offset < plog.log_end_offset:
        data = plog.read(offset, 1 << 20)
        if not data:
            break
        for batch in kafka_batches(data):
            for r in batch:
                if r.offset >= offset:
                    out.append((r.offset, r.key, r.value))
        offset = split_batches(data)[-1][1].next_offset
    return out


def fill(plog: PartitionLog, keys: int, rounds: int, tombstones: tuple[int, ...] = (), codec: int = 0,
         timestamp: int = TS) -> None:
    for r in range(rounds):
        for k in range(keys):
            value = None if (r == rounds - 1 and k in tombstones) else f"v{r}-{k}".encode()
            plog.append_from_client(make_batch(key=f"k{k}".encode(), value=value, codec=codec,
                                               timestamp=timestamp + r))  # type: ignore[arg-type]
    plog.roll()


def cleaner_for(plog: PartitionLog, directory: Path, now: int) -> LogCleaner:
    return LogCleaner(directory, lambda: [plog], lambda: now)


def latest_values(plog: PartitionLog) -> dict[bytes | None, bytes | None]:
    return {key: value for _o, key, value in records(plog)}


@pytest.mark.parametrize("codec", [0, 1, 3])
def test_compaction_keeps_the_latest_record_of_each_key_at_its_offset(tmp_path: Path, codec: int) -> None:
    plog = open_log(tmp_path / "t-0", compact_config())
    fill(plog, keys=10, rounds=5, codec=codec)
    before = records(plog)
    expected = {key: (offset, value) for offset, key, value in before}
    cleaner = cleaner_for(plog, tmp_path, TS + 10)
    result = cleaner.clean_once()
    assert result is not None and result.records_removed == 40
    after = records(plog)
    assert [(o, k, v) for o, k, v in after] == sorted((o, k, v) for k, (o, v) in expected.items())
    assert plog.size_bytes < sum(1 for _ in before) * 60
    # offsets and reads from a removed range: the next kept offset
    first_kept = after[0][0]
    assert records(plog)[0][0] == first_kept
    data = plog.read(3, 1 << 20)
    assert kafka_batches(data)[0].next_offset > 3
    # the cleaned log loads back identically (indexes included) and the checkpoint is written
    plog.close()
    again = open_log(tmp_path / "t-0", compact_config())
    assert records(again) == after
    assert (tmp_path / CLEANER_CHECKPOINT).read_text().splitlines()[2] == f"t 0 {again.segments[-1].base_offset}"
    again.close()


def test_uncompressed_batches_of_many_records_lose_only_shadowed_records(tmp_path: Path) -> None:
    plog = open_log(tmp_path / "t-0", compact_config())
    for r in range(3):
        plog.append_from_client(batch_of_records(
            [(f"k{(i + r) % 4}".encode(), f"r{r}i{i}".encode(), TS + i, []) for i in range(6)]))
    plog.roll()
    LogCleaner(tmp_path, lambda: [plog], lambda: TS).clean_once()
    after = records(plog)
    assert sorted(k for _o, k, _v in after) == [b"k0", b"k1", b"k2", b"k3"]
    assert latest_values(plog)[b"k1"] == b"r2i3" and latest_values(plog)[b"k3"] == b"r2i5"
    assert len(split_batches(plog.read(0, 1 << 20))) == 1  # two batches lost all their records


def test_tombstones_stay_for_the_first_cleaning_and_go_after_delete_retention(tmp_path: Path) -> None:
    plog = open_log(tmp_path / "t-0", compact_config(delete_retention_ms=1000))
    fill(plog, keys=5, rounds=2, tombstones=(1, 3))
    cleaner = cleaner_for(plog, tmp_path, TS + 5000)
    cleaner.clean_once()
    assert latest_values(plog)[b"k1"] is None  # still there: consumers must see the delete
    fill(plog, keys=1, rounds=1, timestamp=TS + 100)  # new dirty data triggers another cleaning
    cleaner.clean_once()
    keys = {k for _o, k, _v in records(plog)}
    assert b"k1" not in keys and b"k3" not in keys
    assert latest_values(plog)[b"k0"] == b"v0-0"

    young = open_log(tmp_path / "u-0", compact_config(delete_retention_ms=10**9))
    fill(young, keys=5, rounds=2, tombstones=(1,))
    c2 = cleaner_for(young, tmp_path / "c2", TS + 5000)
    (tmp_path / "c2").mkdir()
    c2.clean_once()
    fill(young, keys=1, rounds=1)
    c2.clean_once()
    assert latest_values(young)[b"k1"] is None  # delete.retention.ms not over: the tombstone stays


def test_min_compaction_lag_and_dirty_ratio_decide_what_is_cleanable(tmp_path: Path) -> None:
    plog = open_log(tmp_path / "t-0", compact_config(min_compaction_lag_ms=60_000, min_cleanable_dirty_ratio=0.5))
    fill(plog, keys=5, rounds=4)
    c = cleanable(plog, None, TS + 1000)  # every record is younger than the lag
    assert c.dirty_bytes == 0 and c.first_uncleanable == plog.segments[0].base_offset
    assert LogCleaner(tmp_path, lambda: [plog], lambda: TS + 1000).clean_once() is None
    old = cleanable(plog, None, TS + 120_000)
    assert old.dirty_bytes > 0 and old.ratio == 1.0
    assert LogCleaner(tmp_path, lambda: [plog], lambda: TS + 120_000).clean_once() is not None
    # once clean, a small dirty tail stays below the 0.5 ratio
    fill(plog, keys=1, rounds=1, timestamp=TS)
    cleaner = LogCleaner(tmp_path, lambda: [plog], lambda: TS + 120_000)
    found = cleaner.dirtiest()
    assert found is None and 0 < cleaner.stats.max_dirty_ratio < 0.5


def test_max_compaction_lag_forces_a_cleaning_below_the_ratio(tmp_path: Path) -> None:
    plog = open_log(tmp_path / "t-0", compact_config(min_cleanable_dirty_ratio=0.99, max_compaction_lag_ms=1000))
    fill(plog, keys=5, rounds=4)
    LogCleaner(tmp_path, lambda: [plog], lambda: TS + 10).clean_once()
    fill(plog, keys=1, rounds=1)
    assert LogCleaner(tmp_path, lambda: [plog], lambda: TS + 10).dirtiest() is None
    assert LogCleaner(tmp_path, lambda: [plog], lambda: TS + 60_000).dirtiest() is not None


def test_small_segments_are_grouped_up_to_segment_bytes(tmp_path: Path) -> None:
    plog = open_log(tmp_path / "t-0", compact_config(segment_bytes=300))
    for r in range(12):
        plog.append_from_client(make_batch(key=f"k{r % 3}".encode(), value=b"x" * 20, timestamp=TS + r))
        plog.roll()
    assert len(plog.segments) == 13
    plog.update_config(compact_config(segment_bytes=1000))
    LogCleaner(tmp_path, lambda: [plog], lambda: TS).clean_once()
    assert len(plog.segments) < 13
    assert all(s.size <= 1000 for s in plog.segments)
    assert [k for _o, k, _v in records(plog)] == [b"k0", b"k1", b"k2"]


def test_idempotent_producer_keeps_its_last_batch_and_dedup_after_cleaning(tmp_path: Path) -> None:
    plog = open_log(tmp_path / "t-0", compact_config())
    for seq in range(4):
        plog.append_from_client(make_batch(producer_id=7, epoch=0, base_sequence=seq, key=b"same"))
    plog.append_from_client(make_batch(key=b"same", value=b"newest"))  # shadows every producer record
    plog.roll()
    LogCleaner(tmp_path, lambda: [plog], lambda: TS).clean_once()
    headers = [h for _p, h in split_batches(plog.read(0, 1 << 20))]
    empty = [h for h in headers if h.producer_id == 7]
    assert len(empty) == 1 and empty[0].records_count == 0 and empty[0].base_sequence == 3
    assert records(plog) == [(4, b"same", b"newest")]
    plog.abandon()  # a crash: producer state is rebuilt from the cleaned log
    again = open_log(tmp_path / "t-0", compact_config(), clean=False)
    dup = again.append_from_client(make_batch(producer_id=7, epoch=0, base_sequence=3, key=b"same"))
    assert dup.duplicate and dup.base_offset == 3
    nxt = again.append_from_client(make_batch(producer_id=7, epoch=0, base_sequence=4, key=b"same"))
    assert not nxt.duplicate
    again.close()


def test_aborted_records_go_committed_ones_compact_and_markers_and_the_aborted_index_stay(
        tmp_path: Path) -> None:
    plog = open_log(tmp_path / "t-0", compact_config())
    plog.append_from_client(make_batch(key=b"k", value=b"plain-old"))  # 0
    aborted = batch_of_records([(b"k", b"aborted", TS, []), (b"x", b"aborted-x", TS, [])], producer_id=9,
                               epoch=0, base_sequence=0, transactional=True)
    plog.append_from_client(aborted)  # 1-2
    plog.append_marker(9, 0, commit=False, coordinator_epoch=0)  # 3: ABORT
    committed = batch_of_records([(b"j", b"committed", TS, []), (b"y", b"committed-y", TS, [])],
                                 producer_id=9, epoch=0, base_sequence=2, transactional=True)
    plog.append_from_client(committed)  # 4-5
    plog.append_marker(9, 0, commit=True, coordinator_epoch=0)  # 6: COMMIT
    plog.append_from_client(make_batch(key=b"j", value=b"plain-j"))  # 7: shadows the committed j
    plog.roll()
    aborted_before = plog.collect_aborted_transactions(0, plog.log_end_offset)
    assert aborted_before == [(9, 1)]
    result = LogCleaner(tmp_path, lambda: [plog], lambda: TS).clean_once()
    assert result is not None and result.records_removed == 3  # both aborted records, the committed j
    headers = [h for _p, h in split_batches(plog.read(0, 1 << 20))]
    assert [(h.base_offset, h.records_count, h.is_control) for h in headers] == [
        (0, 1, False), (3, 1, True), (4, 1, False), (6, 1, True), (7, 1, False)]
    data_records = [(o, k, v) for o, k, v in records(plog) if o not in (3, 6)]  # 3 and 6 are markers
    # the aborted k did not shadow the older plain k
    assert data_records == [(0, b"k", b"plain-old"), (5, b"y", b"committed-y"), (7, b"j", b"plain-j")]
    assert plog.collect_aborted_transactions(0, plog.log_end_offset) == aborted_before
    plog.abandon()
    again = open_log(tmp_path / "t-0", compact_config(), clean=False)
    # recovery rebuilds the aborted index from the markers of transactions that still have data:
    # this one has none left, so a read_committed reader has nothing to drop either way
    assert [(o, k, v) for o, k, v in records(again) if o not in (3, 6)] == data_records
    assert again.collect_aborted_transactions(0, again.log_end_offset) in ([], aborted_before)
    assert again.last_stable_offset == again.log_end_offset  # no transaction left open by the cleaning
    dup = again.append_from_client(batch_of_records([(b"j", b"committed", TS, []), (b"y", b"committed-y", TS, [])],
                                                    producer_id=9, epoch=0, base_sequence=2, transactional=True))
    assert dup.duplicate and dup.base_offset == 4  # the producer's last batch survived
    again.close()


# ---------------------------------------------------------------------- crash safety

CRASH_SCRIPT = textwrap.dedent("""
    import os, signal, sys
    from pathlib import Path
    from minikafka.storage.cleaner import LogCleaner
    from minikafka.storage.log import PartitionLog
    directory, config, kill_at, now = Path(sys.argv[1]), {}, int(sys.argv[2]), int(sys.argv[3])
    import json
    config = json.loads(Path(sys.argv[4]).read_text())
    plog = PartitionLog.open("t", 0, directory, config)
    calls = []
    def hook(step):
        calls.append(step)
        if len(calls) == kill_at:
            os.kill(os.getpid(), signal.SIGKILL)
    cleaner = LogCleaner(directory.parent, lambda: [plog], lambda: now)
    cleaner.hook = hook
    cleaner.clean_once()
    print(len(calls))
""")


def test_a_kill_at_any_step_of_a_cleaning_loads_to_before_or_after(tmp_path: Path) -> None:
    config = compact_config(segment_bytes=1500)
    seed = tmp_path / "seed" / "t-0"
    plog = open_log(seed, config)
    for r in range(6):
        for k in range(8):
            value = None if (r == 5 and k == 2) else f"v{r}-{k}".encode() * 3
            plog.append_from_client(make_batch(key=f"k{k}".encode(), value=value, timestamp=TS + r))
    plog.roll()
    before = records(plog)
    plog.close()
    config_file = tmp_path / "config.json"
    config_file.write_text(json.dumps(config))
    script = tmp_path / "clean.py"
    script.write_text(CRASH_SCRIPT)

    def run(directory: Path, kill_at: int) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, str(script), str(directory), str(kill_at), str(TS + 10),
                               str(config_file)], capture_output=True, text=True, timeout=120,
                              env={"PYTHONPATH": str(Path(__file__).resolve().parents[2])})

    import shutil

    full = tmp_path / "full" / "t-0"
    shutil.copytree(seed, full)
    done = run(full, 10**9)
    assert done.returncode == 0, done.stderr
    steps = int(done.stdout.strip().splitlines()[-1])
    assert steps > 10
    after_log = PartitionLog.open("t", 0, full, config)
    after = records(after_log)
    after_log.close()
    assert after != before and len(after) < len(before)
    picks = sorted(set(random.Random(18).sample(range(1, steps + 1), min(steps, 25))) | {1, steps})
    outcomes = set()
    for kill_at in picks:
        work = tmp_path / f"kill-{kill_at}" / "t-0"
        shutil.copytree(seed, work)
        killed = run(work, kill_at)
        assert killed.returncode == -9, (kill_at, killed.stderr)
        loaded = PartitionLog.open("t", 0, work, config, clean=False)
        got = records(loaded)
        loaded.close()
        assert got in (before, after), f"kill at step {kill_at} left a mix"
        outcomes.add("after" if got == after else "before")
        leftovers = [p.name for p in work.iterdir() if p.name.endswith((".cleaned", ".swap", ".deleted"))]
        assert not leftovers, leftovers
    assert outcomes == {"before", "after"}


def test_timestamp_lookups_work_over_kept_empty_batches(tmp_path: Path) -> None:
    plog = open_log(tmp_path / "t-0", compact_config())
    plog.append_from_client(make_batch(key=b"a", value=b"1", timestamp=TS))
    plog.append_from_client(make_batch(producer_id=3, epoch=0, base_sequence=0, key=b"b", timestamp=TS + 500))
    plog.append_from_client(make_batch(key=b"b", value=b"newer", timestamp=TS + 10))
    plog.roll()
    LogCleaner(tmp_path, lambda: [plog], lambda: TS).clean_once()
    headers = [h for _p, h in split_batches(plog.read(0, 1 << 20))]
    assert [h.records_count for h in headers] == [1, 0, 1]  # the producer's last batch, emptied
    assert plog.max_timestamp_offset() == (1, TS + 500)
    assert plog.offset_for_timestamp(TS + 5) == (2, TS + 10)


def test_the_throttler_keeps_reads_and_writes_under_the_rate() -> None:
    from minikafka.storage.cleaner import Throttler

    now = [0.0]
    slept: list[float] = []

    def sleep(seconds: float) -> None:
        slept.append(seconds)
        now[0] += seconds

    throttler = Throttler(1_000_000, clock=lambda: now[0], sleep=sleep)
    for _ in range(10):
        throttler.add(100_000)
    assert now[0] == pytest.approx(1.0)  # 1 MB at 1 MB/s
    now[0] += 5  # idle time earns at most a 0.3 s burst, not 5 s of it
    throttler.add(100_000)
    assert len(slept) == 10
    throttler.add(1_000_000)
    assert slept[-1] == pytest.approx(1.1 - 0.3 - 0.1)
    unbounded = Throttler(float("inf"), clock=lambda: now[0], sleep=sleep)
    unbounded.add(10**12)
    assert len(slept) == 11


def test_the_spark_exporter_reads_a_cleaned_log_as_a_consumer_does(tmp_path: Path) -> None:
    """Gaps and kept empty batches in cleaned segments: the exporter's reader (no SparkSession)
    returns the records a consumer reads, at their offsets."""
    from minikafka.storage.log_manager import LogManager
    from tests.spark.test_spark_reader import read_all

    data = tmp_path / "data"
    manager = LogManager(data, BrokerConfig(data_dir=str(data)))
    manager.load()
    manager.create_topic("c", 1, {"cleanup.policy": "compact", "segment.bytes": "1500",
                                  "min.cleanable.dirty.ratio": "0.01"})
    plog = manager.get_log("c", 0)
    assert plog is not None
    for seq in range(3):
        plog.append_from_client(make_batch(producer_id=5, epoch=0, base_sequence=seq, key=b"p"))
    plog.append_from_client(make_batch(key=b"p", value=b"plain"))  # empties the producer's last batch
    fill(plog, keys=6, rounds=4, codec=1)
    cleaner = LogCleaner(data, manager.all_logs, lambda: TS)
    assert cleaner.clean_once() is not None
    kept = [h for _p, h in split_batches(plog.read(0, 1 << 20))]
    assert any(h.records_count == 0 for h in kept)
    expected = [(o, k, v) for o, k, v in records(plog)]
    manager.shutdown()
    rows = read_all(str(data), subscribe="c", startingOffsets="earliest")
    assert [(r["offset"], r["key"], r["value"]) for r in rows] == expected


def test_a_cleaning_is_dropped_when_the_log_changed_under_it(tmp_path: Path) -> None:
    """Segments deleted (DeleteRecords, retention) while the worker wrote: the swap does not happen,
    the .cleaned files go and the log reads as the deletion left it."""
    import threading

    from minikafka.storage.cleaner import Throttler, install, write_cleaned

    plog = open_log(tmp_path / "t-0", compact_config(segment_bytes=600))
    fill(plog, keys=4, rounds=6)
    cleaner = LogCleaner(tmp_path, lambda: [plog], lambda: TS)
    found = cleaner.dirtiest()
    assert found is not None
    plan = cleaner.plan(*found)
    result = write_cleaned(plan, Throttler(float("inf")), threading.Event())
    assert any(p.name.endswith(".cleaned") for p in plog.dir.iterdir())
    plog.delete_records(plog.segments[2].base_offset)  # the first two segments go
    expected = records(plog)
    assert not install(plog, result, TS)
    assert not any(p.name.endswith((".cleaned", ".swap")) for p in plog.dir.iterdir())
    assert records(plog) == expected


def test_an_open_transaction_bounds_the_cleanable_range(tmp_path: Path) -> None:
    plog = open_log(tmp_path / "t-0", compact_config(segment_bytes=400))
    fill(plog, keys=3, rounds=3)
    open_txn = batch_of_records([(b"k0", b"in-flight", TS, [])], producer_id=4, epoch=0, base_sequence=0,
                                transactional=True)
    txn_offset = plog.append_from_client(open_txn).base_offset
    fill(plog, keys=3, rounds=3)  # shadows everything, but after the open transaction
    assert plog.last_stable_offset == txn_offset
    c = cleanable(plog, None, TS)
    assert c.first_uncleanable <= txn_offset
    assert all(s.next_offset <= txn_offset for s in plog.segments if s.base_offset < c.first_uncleanable)
    before_txn = [r for r in records(plog) if r[0] >= c.first_uncleanable]
    LogCleaner(tmp_path, lambda: [plog], lambda: TS).clean_once()
    assert [r for r in records(plog) if r[0] >= c.first_uncleanable] == before_txn  # untouched
    plog.append_marker(4, 0, commit=True, coordinator_epoch=0)
    plog.roll()
    assert cleanable(plog, None, TS).first_uncleanable == plog.segments[-1].base_offset


# ---------------------------------------------------------------------- transaction markers


def read_committed(plog: PartitionLog, max_bytes: int = 200) -> list[tuple[int, bytes | None, bytes | None]]:
    """``(offset, key, value)`` a read_committed consumer gets: the broker's Fetch path (reads of
    at most ``max_bytes`` up to the LSO, each with its aborted-transaction list), filtered as the
    Java consumer filters each fetch (a producer is aborted from the first offset of its listed
    transaction until its ABORT marker)."""
    out: list[tuple[int, bytes | None, bytes | None]] = []
    offset = plog.log_start_offset
    for _ in range(10_000):
        lso = plog.last_stable_offset
        if offset >= lso:
            return out
        data = plog.read(offset, max_bytes, max_offset=lso)
        batches = kafka_batches(data)
        upper = batches[-1].next_offset
        listed = sorted(plog.collect_aborted_transactions(offset, upper), key=lambda t: t[1])
        aborted_pids: set[int] = set()
        for batch in batches:
            while listed and listed[0][1] <= batch.next_offset - 1:
                aborted_pids.add(listed.pop(0)[0])
            if batch.is_control_batch:
                if batch.producer_id in aborted_pids and next(iter(batch)).key[2:4] == b"\0\0":
                    aborted_pids.discard(batch.producer_id)
                continue
            if batch.is_transactional and batch.producer_id in aborted_pids:
                continue
            out.extend((r.offset, r.key, r.value) for r in batch if r.offset >= offset)
        offset = upper
    raise AssertionError("the read did not reach the LSO")


def txn(plog: PartitionLog, pid: int, seq: int, keys: list[bytes], value: bytes) -> None:
    plog.append_from_client(batch_of_records([(k, value, TS, []) for k in keys], producer_id=pid, epoch=0,
                                             base_sequence=seq, transactional=True))


def control_headers(plog: PartitionLog) -> list[Any]:
    return [h for h in all_headers(plog) if h.is_control]


def test_markers_go_two_cleanings_after_their_transaction_empties_and_delete_retention(tmp_path: Path) -> None:
    """An ABORT marker and its .txnindex entry stay while any aborted batch is left; a marker
    whose transaction has nothing left gets a delete horizon, and goes at a cleaning past it; a
    read_committed fetch returns exactly the committed records before, between and after."""
    retention = 10_000
    plog = open_log(tmp_path / "t-0", compact_config(delete_retention_ms=retention))
    plog.append_from_client(make_batch(key=b"k", value=b"plain-old"))  # 0
    txn(plog, 9, 0, [b"k", b"x"], b"aborted")  # 1-2
    plog.append_marker(9, 0, commit=False, coordinator_epoch=0)  # 3: ABORT
    txn(plog, 9, 2, [b"j"], b"committed-j")  # 4
    plog.append_marker(9, 0, commit=True, coordinator_epoch=0)  # 5: COMMIT, its data shadowed below
    plog.append_from_client(make_batch(key=b"j", value=b"plain-j"))  # 6
    txn(plog, 9, 3, [b"c"], b"committed-c")  # 7: the producer's last batch
    plog.append_marker(9, 0, commit=True, coordinator_epoch=0)  # 8: COMMIT, its data stays
    plog.roll()
    committed = [(0, b"k", b"plain-old"), (6, b"j", b"plain-j"), (7, b"c", b"committed-c")]
    assert [r for r in read_committed(plog) if r[0] != 4] == committed  # 4 is shadowed, not yet cleaned
    cleaner = LogCleaner(tmp_path, lambda: [plog], lambda: now)

    def clean_again(at: int) -> None:
        nonlocal now
        now = at
        plog.append_from_client(make_batch(key=b"dirty", value=str(at).encode()))  # something to clean
        plog.roll()
        assert cleaner.clean_once() is not None

    now = TS
    assert cleaner.clean_once() is not None  # pass 1: the aborted and shadowed records go
    assert [h.base_offset for h in control_headers(plog)] == [3, 5, 8]
    assert not any(h.attributes & 0x40 for h in control_headers(plog))
    assert plog.collect_aborted_transactions(0, plog.log_end_offset) == [(9, 1)]  # its records were read by this cleaning
    assert [r for r in read_committed(plog) if r[1] != b"dirty"] == committed

    clean_again(TS + 1)  # pass 2: nothing of either transaction is left; horizons are written
    controls = control_headers(plog)
    assert [h.base_offset for h in controls] == [3, 5, 8]
    horizons = {h.base_offset: h.base_timestamp for h in controls if h.attributes & 0x40}
    assert horizons == {3: TS + 1 + retention, 5: TS + 1 + retention}
    assert plog.collect_aborted_transactions(0, plog.log_end_offset) == []
    marker_batches = [b for b in kafka_batches(plog.read(0, 1 << 20)) if b.is_control_batch]
    assert all(r.timestamp == b.max_timestamp for b in marker_batches for r in b)  # record timestamps unchanged
    assert all(b.validate_crc() for b in kafka_batches(plog.read(0, 1 << 20)))
    plog.close()  # the stamped markers load back as they are
    plog = open_log(tmp_path / "t-0", compact_config(delete_retention_ms=retention))
    assert {h.base_offset: h.base_timestamp for h in control_headers(plog) if h.attributes & 0x40} == horizons
    assert [r for r in read_committed(plog) if r[1] != b"dirty"] == committed

    clean_again(TS + retention)  # before the horizon: they stay
    assert [h.base_offset for h in control_headers(plog)] == [3, 5, 8]
    clean_again(TS + 1 + retention)  # at the horizon: they go; the COMMIT of kept data stays
    assert [h.base_offset for h in control_headers(plog)] == [8]
    assert [r for r in read_committed(plog) if r[1] != b"dirty"] == committed
    assert plog.last_stable_offset == plog.log_end_offset

    plog.abandon()  # a crash: producer state and the aborted index come back from the cleaned log
    again = open_log(tmp_path / "t-0", compact_config(delete_retention_ms=retention), clean=False)
    assert again.last_stable_offset == again.log_end_offset
    assert [r for r in read_committed(again) if r[1] != b"dirty"] == committed
    dup = again.append_from_client(batch_of_records([(b"c", b"committed-c", TS, [])], producer_id=9, epoch=0,
                                                    base_sequence=3, transactional=True))
    assert dup.duplicate and dup.base_offset == 7
    again.close()


def test_an_abort_marker_stays_while_aborted_records_are_left_in_a_later_group(tmp_path: Path) -> None:
    """A transaction whose records span several groups (small segment.bytes): at every cleaning
    each listed aborted transaction still has its ABORT marker, aborted batches still in the log
    are listed (the entry goes one cleaning after them, the marker at a later one), and a read_committed fetch in small steps returns exactly the committed records."""
    plog = open_log(tmp_path / "t-0", compact_config(segment_bytes=300, delete_retention_ms=0))
    for i in range(6):
        txn(plog, 4, i, [f"a{i}".encode()], b"aborted")
        plog.append_from_client(make_batch(key=f"p{i}".encode(), value=b"plain"))
        if i % 2:
            plog.roll()
    plog.append_marker(4, 0, commit=False, coordinator_epoch=0)
    txn(plog, 4, 6, [b"last"], b"committed")
    plog.append_marker(4, 0, commit=True, coordinator_epoch=0)
    plog.roll()
    expected = {f"p{i}".encode(): b"plain" for i in range(6)} | {b"last": b"committed"}
    assert {k: v for _o, k, v in read_committed(plog, 150)} == expected
    now = TS
    cleaner = LogCleaner(tmp_path, lambda: [plog], lambda: now)
    for step in range(5):
        now = TS + step
        if step:
            plog.append_from_client(make_batch(key=b"p0", value=b"newer"))
            plog.roll()
            expected[b"p0"] = b"newer"
        cleaner.clean_once()
        headers = all_headers(plog)
        listed = plog.collect_aborted_transactions(0, plog.log_end_offset)
        abort_offsets = [h.base_offset for h in headers if h.is_control and h.base_offset <= 12]
        aborted_left = [h for h in headers if h.producer_id == 4 and not h.is_control and h.base_sequence < 6]
        if aborted_left:  # aborted batches (emptied or not) are listed while they are left
            assert listed == [(4, 0)]
        if listed:
            assert abort_offsets == [12]
        got = read_committed(plog, 150)
        assert not any(v == b"aborted" for _o, _k, v in got)
        assert {k: v for _o, k, v in got} == expected
    assert not plog.collect_aborted_transactions(0, plog.log_end_offset)
    assert not [h for h in all_headers(plog) if h.is_control and h.base_offset == 12]  # gone in the end


def all_headers(plog: PartitionLog) -> list[Any]:
    """Every batch header of the log, across segments."""
    out: list[Any] = []
    offset = plog.log_start_offset
    while offset < plog.log_end_offset:
        data = plog.read(offset, 1 << 20)
        if not data:
            break
        out.extend(h for _p, h in split_batches(data))
        offset = out[-1].next_offset
    return out


def test_a_marker_that_bumped_the_producer_epoch_stays_for_fencing(tmp_path: Path) -> None:
    """A producer whose last write is an ABORT marker with a new epoch (a timed-out transaction)
    has no cached batches: that marker stays however old, so a restart still fences the old epoch."""
    from minikafka.errors import ErrorCode, KafkaError

    plog = open_log(tmp_path / "t-0", compact_config(delete_retention_ms=0))
    txn(plog, 6, 0, [b"k"], b"aborted")  # 0
    plog.append_marker(6, 1, commit=False, coordinator_epoch=0)  # 1: ABORT with the bumped epoch
    plog.append_from_client(make_batch(key=b"k", value=b"plain"))  # 2
    plog.roll()
    now = TS
    cleaner = LogCleaner(tmp_path, lambda: [plog], lambda: now)
    for step in range(4):
        now = TS + step
        plog.append_from_client(make_batch(key=b"dirty", value=str(step).encode()))
        plog.roll()
        assert cleaner.clean_once() is not None
    assert [(h.base_offset, h.producer_epoch, h.records_count) for h in control_headers(plog)] == [(1, 1, 1)]
    assert not plog.collect_aborted_transactions(0, plog.log_end_offset)
    plog.abandon()
    again = open_log(tmp_path / "t-0", compact_config(delete_retention_ms=0), clean=False)
    with pytest.raises(KafkaError) as fenced:
        again.append_from_client(batch_of_records([(b"k", b"zombie", TS, [])], producer_id=6, epoch=0,
                                                  base_sequence=1, transactional=True))
    assert fenced.value.code == ErrorCode.INVALID_PRODUCER_EPOCH
    again.close()
