"""Snapshots and recovery (docs/semantics.md#snapshots, docs/semantics.md#recovery) end to end: snapshots, restarts, torn and corrupt logs.

The broker is stopped cleanly or as a crash (no snapshot, no flush, no clean marker), files
are damaged on disk between runs where the scenario says so, and a raw client then checks
what the restarted broker answers. Where minikafka deliberately goes further than Kafka
(docs/semantics.md#differences), the test expects minikafka's behaviour and says so.
"""

from __future__ import annotations

import os
import struct
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from minikafka.broker.embedded import BrokerThread
from minikafka.storage.batch import split_batches
from tests.kafka_wire import RawClient, build_batch
from tests.scenario_helpers import P, Q, create_topic, delete_records, log_summary, produce

T = "t"


def B(pid: int, epoch: int, seq: int, **kwargs: Any) -> bytearray:
    return build_batch(producer_id=pid, epoch=epoch, base_sequence=seq, **kwargs)


def ok_at(response: Any, offset: int) -> None:
    assert (response.error_code, response.base_offset) == (0, offset), response


def pdir(broker: BrokerThread, topic: str = T) -> Path:
    return Path(broker.broker_config.data_dir) / f"{topic}-0"


def roll(broker: BrokerThread, topic: str = T) -> None:
    broker.call(lambda: broker.broker.logs.get_log(topic, 0).roll())


def leo(broker: BrokerThread, topic: str = T) -> int:
    with RawClient(broker.bootstrap) as c:
        batches = log_summary(c, topic)
    return batches[-1][0] + batches[-1][4] if batches else broker.broker.logs.get_log(topic, 0).log_end_offset


@pytest.fixture
def fresh(start_broker: Callable[..., BrokerThread]) -> BrokerThread:
    broker = start_broker()
    with RawClient(broker.bootstrap) as c:
        create_topic(c, T)
    return broker


def send(broker: BrokerThread, *batches: bytearray) -> list[Any]:
    with RawClient(broker.bootstrap) as c:
        return [produce(c, T, b) for b in batches]


# --------------------------------------------------------------------------- F. snapshots and restarts


@pytest.mark.parametrize("clean", [True, False], ids=["clean", "crash"])
def test_restart_keeps_the_whole_five_batch_window(fresh: BrokerThread, clean: bool) -> None:
    """minikafka: every one of the last five batches is still a duplicate after the restart."""
    for seq, r in enumerate(send(fresh, *(B(P, 0, s) for s in range(5)))):
        ok_at(r, seq)
    fresh.restart(clean=clean)
    if clean:
        assert (pdir(fresh) / "00000000000000000005.snapshot").exists()
    r4, r3, r0, r5 = send(fresh, B(P, 0, 4), B(P, 0, 3), B(P, 0, 0), B(P, 0, 5))
    ok_at(r4, 4)
    ok_at(r3, 3)  # Kafka answers 45 here (its snapshots keep only the newest batch)
    ok_at(r0, 0)
    ok_at(r5, 5)
    assert leo(fresh) == 6


def test_unclean_restart_rebuilds_window_from_roll_snapshot_and_tail(fresh: BrokerThread) -> None:
    send(fresh, *(B(P, 0, s) for s in range(5)))
    roll(fresh)
    assert (pdir(fresh) / "00000000000000000005.snapshot").exists()
    send(fresh, *(B(P, 0, s) for s in range(5, 10)))
    fresh.restart(clean=False)
    r10, r9, r7, r5, r4 = send(fresh, B(P, 0, 10), B(P, 0, 9), B(P, 0, 7), B(P, 0, 5), B(P, 0, 4))
    ok_at(r10, 10)
    ok_at(r9, 9)
    ok_at(r7, 7)  # Kafka: 45
    assert r5.error_code == 45  # 5 fell out of the window when 10 was appended
    assert r4.error_code == 45
    assert leo(fresh) == 11


def _two_snapshots_then_stop(broker: BrokerThread) -> Path:
    send(broker, B(P, 0, 0))
    roll(broker)
    send(broker, B(P, 0, 1))
    roll(broker)
    broker.stop(clean=True)
    newest = pdir(broker) / "00000000000000000002.snapshot"
    assert newest.exists() and (pdir(broker) / "00000000000000000001.snapshot").exists()
    return newest


@pytest.mark.parametrize(
    "damage",
    [
        pytest.param(lambda b: b[:6] + bytes([b[6] ^ 0xFF]) + b[7:], id="48-flipped-byte"),
        pytest.param(lambda b: b"", id="49-empty"),
        pytest.param(lambda b: b[: len(b) // 2], id="49-half-written"),
        pytest.param(lambda b: b"\x00\x63" + b[2:], id="50-unknown-version"),
    ],
)
def test_bad_newest_snapshot_falls_back_to_older_one_and_replays(
    fresh: BrokerThread, damage: Callable[[bytes], bytes]
) -> None:
    newest = _two_snapshots_then_stop(fresh)
    newest.write_bytes(damage(newest.read_bytes()))
    # the clean marker makes recovery trust the log; producer state still comes from snapshots
    fresh.start()
    r1, r0, r2 = send(fresh, B(P, 0, 1), B(P, 0, 0), B(P, 0, 2))
    ok_at(r1, 1)
    ok_at(r0, 0)
    ok_at(r2, 2)


def _five_batches_then_restart_without_snapshots(broker: BrokerThread, clean: bool) -> None:
    send(broker, *(B(P, 0, s) for s in range(5)))
    broker.stop(clean=clean)
    for snap in pdir(broker).glob("*.snapshot"):
        snap.unlink()
    broker.start()


def test_no_snapshot_after_crash_rebuilds_state_by_scanning_the_log(fresh: BrokerThread) -> None:
    _five_batches_then_restart_without_snapshots(fresh, clean=False)
    r3, r5 = send(fresh, B(P, 0, 3), B(P, 0, 5))
    ok_at(r3, 3)
    ok_at(r5, 5)


def test_no_snapshot_after_clean_shutdown_still_rebuilds_state(fresh: BrokerThread) -> None:
    """minikafka does not take Kafka's shortcut of forgetting producers here (Kafka writes seq 4 twice)."""
    _five_batches_then_restart_without_snapshots(fresh, clean=True)
    ok_at(send(fresh, B(P, 0, 4))[0], 4)
    assert leo(fresh) == 5


def test_producer_only_in_deleted_segment_is_still_known_after_a_crash(fresh: BrokerThread) -> None:
    """minikafka keeps the roll snapshot at the new log start, so P survives a crash too.

    Kafka deletes snapshots at or below the log start offset when it reloads, so after an
    unclean restart it forgets P and writes P's retry a second time (@2).
    """
    ok_at(send(fresh, B(P, 0, 0))[0], 0)
    roll(fresh)
    ok_at(send(fresh, B(Q, 0, 0))[0], 1)
    with RawClient(fresh.bootstrap) as c:
        assert delete_records(c, T, 1).low_watermark == 1
    assert not (pdir(fresh) / "00000000000000000000.log").exists()
    ok_at(send(fresh, B(P, 0, 0))[0], 0)  # known in memory
    fresh.restart(clean=False)
    ok_at(send(fresh, B(Q, 0, 0))[0], 1)
    ok_at(send(fresh, B(P, 0, 0))[0], 0)
    assert leo(fresh) == 2


# --------------------------------------------------------------------------- G. torn and corrupt logs


def _segment(broker: BrokerThread, base: int = 0) -> Path:
    return pdir(broker) / f"{base:020d}.log"


def test_torn_last_batch_is_cut_and_retry_is_appended(fresh: BrokerThread) -> None:
    send(fresh, *(B(P, 0, s) for s in range(4)))
    fresh.stop(clean=False)
    partial = B(P, 0, 4, value=b"x" * 200)
    struct.pack_into(">q", partial, 0, 4)
    with open(_segment(fresh), "ab") as f:
        f.write(partial[: len(partial) // 2])
    fresh.start()
    assert leo(fresh) == 4
    r3, r4 = send(fresh, B(P, 0, 3), B(P, 0, 4))
    ok_at(r3, 3)
    ok_at(r4, 4)


def _flip_in_batch(path: Path, index: int) -> None:
    data = bytearray(path.read_bytes())
    pos, header = split_batches(data)[index]
    data[pos + header.size - 1] ^= 0xFF  # last byte: inside the CRC-covered region
    path.write_bytes(bytes(data))


def test_corrupt_batch_in_active_segment_truncates_there(fresh: BrokerThread) -> None:
    send(fresh, *(B(P, 0, s) for s in range(20)))
    fresh.stop(clean=False)
    _flip_in_batch(_segment(fresh), 7)
    fresh.start()
    assert leo(fresh) == 7
    r6, r7 = send(fresh, B(P, 0, 6), B(P, 0, 7))
    ok_at(r6, 6)
    ok_at(r7, 7)


def test_garbage_after_last_batch_loses_no_record(fresh: BrokerThread) -> None:
    send(fresh, *(B(P, 0, s) for s in range(50)))
    fresh.stop(clean=False)
    for suffix in (".log", ".index"):
        with open(pdir(fresh) / f"{0:020d}{suffix}", "ab") as f:
            f.write(os.urandom(777))
    fresh.start()
    assert leo(fresh) == 50
    with RawClient(fresh.bootstrap) as c:
        assert [b[3] for b in log_summary(c, T)] == list(range(50))


def test_corruption_in_earlier_unflushed_segment_drops_later_segments(fresh: BrokerThread) -> None:
    for start in (0, 100, 200):
        if start:
            roll(fresh)
        with RawClient(fresh.bootstrap) as c:
            for s in range(start, start + 100):
                produce(c, T, B(P, 0, s))
    fresh.stop(clean=False)
    (Path(fresh.broker_config.data_dir) / "recovery-point-offset-checkpoint").unlink(missing_ok=True)
    _flip_in_batch(_segment(fresh, 100), 50)
    fresh.start()
    assert leo(fresh) == 150
    assert not _segment(fresh, 200).exists()


def test_missing_offset_index_is_rebuilt_after_clean_shutdown(fresh: BrokerThread) -> None:
    send(fresh, *(B(P, 0, s, value=b"v" * 300) for s in range(40)))
    fresh.stop(clean=True)
    index = pdir(fresh) / f"{0:020d}.index"
    expected = index.read_bytes()
    assert expected, "the test needs index entries to compare"
    index.unlink()
    fresh.start()
    assert leo(fresh) == 40
    fresh.stop(clean=True)
    assert index.read_bytes() == expected
    fresh.start()


def test_clean_marker_skips_recovery_and_is_deleted_at_start(fresh: BrokerThread) -> None:
    send(fresh, *(B(P, 0, s) for s in range(20)))
    fresh.stop(clean=True)
    marker = Path(fresh.broker_config.data_dir) / ".kafka_cleanshutdown"
    assert marker.exists()
    _flip_in_batch(_segment(fresh), 7)  # not noticed: a clean log is trusted
    fresh.start()
    assert not marker.exists()
    assert fresh.broker.logs.get_log(T, 0).log_end_offset == 20


def test_log_end_below_checkpointed_log_start_leaves_empty_log_at_start(fresh: BrokerThread) -> None:
    send(fresh, *(B(P, 0, s) for s in range(10)))
    with RawClient(fresh.bootstrap) as c:
        assert delete_records(c, T, 4).low_watermark == 4
    fresh.stop(clean=True)
    data_dir = Path(fresh.broker_config.data_dir)
    (data_dir / ".kafka_cleanshutdown").unlink()
    (data_dir / "recovery-point-offset-checkpoint").write_text(f"0\n1\n{T} 0 0\n")
    _flip_in_batch(_segment(fresh), 2)
    fresh.start()
    plog = fresh.broker.logs.get_log(T, 0)
    assert (plog.log_start_offset, plog.log_end_offset) == (4, 4)
