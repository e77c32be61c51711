"""Loading a partition after clean and unclean shutdowns (docs/semantics.md#recovery)."""

from __future__ import annotations

import itertools
import logging
import random
import struct
from pathlib import Path
from typing import Any

import pytest

from minikafka.storage.log import PartitionLog
from tests.storage_helpers import (
    TS,
    batch_positions,
    crash,
    kafka_batches,
    make_batch,
    open_log,
    segment_files,
    topic_config,
)

P = 1000
LOG0 = "00000000000000000000.log"


def _singles(plog: PartitionLog, start: int, end: int, producer: int = P) -> None:
    for seq in range(start, end):
        plog.append_from_client(make_batch(producer, 0, seq, timestamp=TS + seq))


def _written(directory: Path, *bounds: int, config: dict[str, Any] | None = None) -> PartitionLog:
    """A log over ``directory`` with one single-record batch per sequence from the first bound to the
    last, a new segment rolled at each bound in between (``0, 40, 45``: sequences 0-39, roll, 40-44)."""
    plog = open_log(directory, config)
    for i, (start, end) in enumerate(itertools.pairwise(bounds)):
        if i:
            plog.roll()
        _singles(plog, start, end)
    return plog


def _damage_crc_region(path: Path, batch_index: int) -> int:
    """Flip one byte inside the CRC-covered part of a batch; returns that batch's position."""
    pos, _base, _size = batch_positions(path)[batch_index]
    with open(path, "r+b") as f:
        f.seek(pos + 30)
        byte = f.read(1)
        f.seek(pos + 30)
        f.write(bytes([byte[0] ^ 0x5A]))
    return pos


def _warnings(caplog: pytest.LogCaptureFixture) -> str:
    return "\n".join(r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING)


def test_torn_last_batch_is_cut_and_its_retry_is_appended(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    directory = tmp_path / "t-0"
    plog = _written(directory, 0, 4)
    torn = make_batch(P, 0, 4)
    struct.pack_into(">q", torn, 0, 4)
    with open(directory / LOG0, "ab") as f:
        f.write(torn[: len(torn) // 2])
    crash(plog)
    plog = open_log(directory, clean=False)
    assert plog.log_end_offset == 4
    assert "torn batch" in _warnings(caplog)
    assert plog.append_from_client(make_batch(P, 0, 3)).duplicate
    result = plog.append_from_client(make_batch(P, 0, 4))
    assert (result.base_offset, result.duplicate) == (4, False)


def test_corrupt_batch_in_the_active_segment_cuts_the_log_before_it(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    directory = tmp_path / "t-0"
    plog = _written(directory, 0, 20)
    crash(plog)
    pos = _damage_crc_region(directory / LOG0, 7)
    plog = open_log(directory, clean=False)
    assert plog.log_end_offset == 7
    assert (directory / LOG0).stat().st_size == pos
    assert "CRC mismatch" in _warnings(caplog)
    dup = plog.append_from_client(make_batch(P, 0, 6))
    assert (dup.duplicate, dup.base_offset) == (True, 6)
    assert plog.append_from_client(make_batch(P, 0, 7)).base_offset == 7


@pytest.mark.parametrize("seed", range(6))
def test_garbage_after_the_last_batch_loses_no_record(tmp_path: Path, seed: int) -> None:
    rng = random.Random(seed)
    directory = tmp_path / "t-0"
    plog = open_log(directory, topic_config(index_interval_bytes=200))
    _singles(plog, 0, 50)
    plog.flush()
    _singles(plog, 50, 100)
    original = bytes(plog.read(0, 1 << 20))
    crash(plog)
    for name in (LOG0, "00000000000000000000.index"):
        with open(directory / name, "ab") as f:
            f.write(rng.randbytes(rng.randint(1, 1024)))
    plog = open_log(directory, topic_config(index_interval_bytes=200), clean=False, recovery_point=50)
    assert plog.log_end_offset == 100
    assert bytes(plog.read(0, 1 << 20)) == original
    assert sum(1 for b in kafka_batches(original) for _ in b) == 100


def test_corruption_in_an_earlier_unflushed_segment_deletes_the_later_ones(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    directory = tmp_path / "t-0"
    plog = _written(directory, 0, 100, 200, 210)
    crash(plog)
    _damage_crc_region(directory / "00000000000000000100.log", 50)  # offset 150
    plog = open_log(directory, clean=False, recovery_point=0)
    assert plog.log_end_offset == 150
    assert [g.base_offset for g in plog.segments] == [0, 100]
    assert segment_files(directory, ".log") == [LOG0, "00000000000000000100.log"]
    assert not (directory / "00000000000000000200.index").exists()
    assert "deleting segment 200" in _warnings(caplog)
    assert plog.append_from_client(make_batch(P, 0, 149)).duplicate
    assert plog.append_from_client(make_batch(P, 0, 150)).base_offset == 150


def test_missing_offset_index_after_clean_shutdown_is_rebuilt_identically(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    directory = tmp_path / "t-0"
    config = topic_config(index_interval_bytes=150)
    plog = _written(directory, 0, 40, 45, config=config)
    data = bytes(plog.read(0, 1 << 20))
    plog.close()
    index = (directory / "00000000000000000000.index").read_bytes()
    assert len(index) >= 16
    (directory / "00000000000000000000.index").unlink()
    plog = open_log(directory, config, clean=True)
    assert "offset index missing" in _warnings(caplog)
    assert (directory / "00000000000000000000.index").read_bytes() == index
    assert bytes(plog.read(0, 1 << 20)) == data and plog.log_end_offset == 45


def test_clean_shutdown_skips_re_validation(tmp_path: Path) -> None:
    directory = tmp_path / "t-0"
    _written(directory, 0, 20).close()
    _damage_crc_region(directory / LOG0, 5)
    plog = open_log(directory, clean=True, recovery_point=0)
    assert plog.log_end_offset == 20  # nothing was re-verified, so nothing was cut
    plog.close()
    plog = open_log(directory, clean=False, recovery_point=0)
    assert plog.log_end_offset == 5  # the same damage is found once recovery runs


def test_log_end_below_checkpointed_log_start_leaves_one_empty_segment_there(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    directory = tmp_path / "t-0"
    plog = _written(directory, 0, 8)
    assert plog.delete_records(4) == 4
    crash(plog)
    _damage_crc_region(directory / LOG0, 2)
    plog = open_log(directory, clean=False, log_start_offset=4)
    assert plog.log_end_offset == plog.log_start_offset == 4
    assert [g.base_offset for g in plog.segments] == [4]
    assert segment_files(directory, ".log") == ["00000000000000000004.log"]
    assert "below the checkpointed log start" in _warnings(caplog)
    assert plog.append_from_client(make_batch(P, 1, 0)).base_offset == 4


def test_unclean_restart_after_a_roll_rebuilds_producers_from_the_roll_snapshot(tmp_path: Path) -> None:
    """An unclean restart after a roll, in minikafka's form: the whole window of five batches survives."""
    directory = tmp_path / "t-0"
    plog = open_log(directory)
    _singles(plog, 0, 5)
    plog.roll()
    plog.flush()
    _singles(plog, 5, 10)
    crash(plog)
    assert "00000000000000000005.snapshot" in segment_files(directory, ".snapshot")
    plog = open_log(directory, clean=False, recovery_point=5)
    assert "00000000000000000010.snapshot" in segment_files(directory, ".snapshot")
    for seq in (9, 7, 5):
        dup = plog.append_from_client(make_batch(P, 0, seq))
        assert (dup.duplicate, dup.base_offset) == (True, seq)
    assert plog.append_from_client(make_batch(P, 0, 10)).base_offset == 10


def test_unclean_restart_without_snapshots_rebuilds_producers_from_the_log(tmp_path: Path) -> None:
    directory = tmp_path / "t-0"
    plog = open_log(directory, topic_config(segment_bytes=600))
    _singles(plog, 0, 12)
    _singles(plog, 0, 3, producer=2000)
    crash(plog)
    for name in segment_files(directory, ".snapshot"):
        (directory / name).unlink()
    plog = open_log(directory, topic_config(segment_bytes=600), clean=False)
    assert plog.append_from_client(make_batch(P, 0, 11)).duplicate
    assert plog.append_from_client(make_batch(2000, 0, 2)).duplicate
    assert plog.append_from_client(make_batch(P, 0, 12)).base_offset == 15


def test_clean_restart_without_snapshots_replays_the_log_instead_of_forgetting_producers(tmp_path: Path) -> None:
    """Deliberately not Kafka's shortcut (docs/semantics.md#no-shortcut-for-a-clean-start-without-snapshots): producers are rebuilt from the log."""
    directory = tmp_path / "t-0"
    _written(directory, 0, 5).close()
    for name in segment_files(directory, ".snapshot"):
        (directory / name).unlink()
    plog = open_log(directory, clean=True)
    dup = plog.append_from_client(make_batch(P, 0, 4))
    assert (dup.duplicate, dup.base_offset) == (True, 4)
    assert plog.log_end_offset == 5


def test_corrupt_time_index_and_an_offset_index_pointing_past_the_log_are_rebuilt(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    directory = tmp_path / "t-0"
    config = topic_config(index_interval_bytes=100)
    _written(directory, 0, 30, 32, config=config).close()
    tindex = (directory / "00000000000000000000.timeindex").read_bytes()
    index = (directory / "00000000000000000000.index").read_bytes()
    (directory / "00000000000000000000.timeindex").write_bytes(tindex[:-12] + struct.pack(">qi", 5, 1))
    (directory / "00000000000000000000.index").write_bytes(index[:-8] + struct.pack(">ii", 29, 10**6))
    plog = open_log(directory, config, clean=True)
    assert "corrupt index" in _warnings(caplog)
    assert (directory / "00000000000000000000.index").read_bytes() == index
    assert (directory / "00000000000000000000.timeindex").read_bytes() == tindex
    assert plog.offset_for_timestamp(TS + 17) == (17, TS + 17)


def test_leftover_temporary_files_and_orphan_indexes_are_removed_at_load(tmp_path: Path) -> None:
    directory = tmp_path / "t-0"
    _written(directory, 0, 3).close()
    for name in ("00000000000000000001.log.deleted", "00000000000000000009.index",
                 "00000000000000000009.timeindex", "00000000000000000002.log.swap"):
        (directory / name).write_bytes(b"x")
    plog = open_log(directory)
    assert plog.log_end_offset == 3
    assert segment_files(directory, ".index") == ["00000000000000000000.index"]
    assert not (directory / "00000000000000000001.log.deleted").exists()
    assert not (directory / "00000000000000000002.log.swap").exists()


@pytest.mark.parametrize("seed", range(25))
def test_random_damage_never_crashes_and_leaves_a_valid_prefix_of_the_log(tmp_path: Path, seed: int) -> None:
    rng = random.Random(seed)
    directory = tmp_path / "t-0"
    config = topic_config(segment_bytes=1500, index_interval_bytes=120)
    plog = open_log(directory, config)
    for seq in range(40):
        plog.append_from_client(make_batch(P, 0, seq * 2, count=2, timestamp=TS + seq, value=b"z" * rng.randint(0, 60)))
    original = {g.base_offset: g.log_path.read_bytes() for g in plog.segments}
    crash(plog)
    clean = rng.random() < 0.3
    # After a clean shutdown .log files are trusted (not re-verified, as in Kafka): damage only
    # the other files then.
    suffixes = (".index", ".timeindex", ".snapshot") if clean else (".log", ".index", ".timeindex", ".snapshot")
    files = sorted(p for p in directory.iterdir() if p.suffix in suffixes)
    for _ in range(rng.randint(1, 4)):
        victim = rng.choice(files)
        data = bytearray(victim.read_bytes())
        action = rng.choice(["flip", "truncate", "append", "zero"])
        if action == "flip" and data:
            for _ in range(rng.randint(1, 5)):
                data[rng.randrange(len(data))] ^= 1 << rng.randrange(8)
        elif action == "truncate":
            del data[rng.randint(0, len(data)):]
        elif action == "append":
            data += rng.randbytes(rng.randint(1, 300))
        elif data:
            start = rng.randrange(len(data))
            data[start:start + rng.randint(1, 100)] = bytes(min(100, len(data) - start))
        victim.write_bytes(bytes(data))
    plog = open_log(directory, config, clean=clean, recovery_point=0 if not clean else 80)
    # What is left reads back as whole batches with contiguous offsets...
    offset = plog.log_start_offset
    while offset < plog.log_end_offset:
        batches = kafka_batches(plog.read(offset, 1 << 20))
        assert batches
        for b in batches:
            assert b.validate_crc()
            assert b.base_offset == offset
            offset = b.base_offset + b.last_offset_delta + 1
    assert offset == plog.log_end_offset
    # ...and every surviving segment is a prefix of what was written (the partition leader
    # epoch, outside the CRC and unused by minikafka, may differ).
    for seg in plog.segments:
        now = seg.log_path.read_bytes()
        before = original.get(seg.base_offset, b"")
        for pos, _base, size in batch_positions(seg.log_path):
            assert now[pos:pos + 12] + now[pos + 16:pos + size] == before[pos:pos + 12] + before[pos + 16:pos + size]
    # New appends work.
    result = plog.append_from_client(make_batch(P, 5, 0))
    assert result.base_offset == plog.log_end_offset - 1
    plog.close()
    reopened = open_log(directory, config)
    assert reopened.log_end_offset == plog.log_end_offset
    assert set(original) >= {g.base_offset for g in reopened.segments[:-1]}
