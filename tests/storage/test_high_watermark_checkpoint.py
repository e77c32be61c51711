"""``replication-offset-checkpoint`` over real files: the bytes are Kafka's offset checkpoint format
(``OffsetCheckpointFile``: version 0, the entry count, ``topic partition offset`` lines), written
atomically, and a loaded replica takes ``min(checkpoint, log end)`` as its high watermark, raised
to its log start, with no entry counting as 0, as Kafka's ``Partition.createLog`` does."""

from __future__ import annotations

from pathlib import Path

from minikafka.storage.high_watermarks import HighWatermarkCheckpoint, restore_high_watermark
from minikafka.storage.log import PartitionLog
from tests.storage_helpers import make_batch, topic_config


def replica(root: Path, topic: str, partition: int, records: int) -> PartitionLog:
    plog = PartitionLog.open(topic, partition, root / f"{topic}-{partition}", topic_config())
    plog.replicated = True  # a cluster replica: appends leave the high watermark alone
    for _ in range(records):
        plog.append_from_client(make_batch())
    return plog


def test_the_file_holds_each_replicas_high_watermark_in_kafkas_format(tmp_path: Path) -> None:
    logs = [replica(tmp_path, "orders.v2", 10, 4), replica(tmp_path, "events", 0, 5), replica(tmp_path, "events", 2, 0)]
    logs[0].update_high_watermark(4)
    logs[1].update_high_watermark(3)
    checkpoint = HighWatermarkCheckpoint(tmp_path)
    checkpoint.write(logs)
    assert (tmp_path / "replication-offset-checkpoint").read_bytes() == b"0\n3\nevents 0 3\nevents 2 0\norders.v2 10 4\n"
    assert sorted(p.name for p in tmp_path.iterdir() if p.is_file()) == ["replication-offset-checkpoint"]  # no .tmp
    assert checkpoint.read() == {("events", 0): 3, ("events", 2): 0, ("orders.v2", 10): 4}
    checkpoint.write([])
    assert (tmp_path / "replication-offset-checkpoint").read_bytes() == b"0\n0\n"


def test_a_loaded_replica_starts_from_the_checkpoint_capped_by_its_log(tmp_path: Path) -> None:
    plog = replica(tmp_path, "events", 0, 5)
    assert plog.high_watermark == 0 and plog.log_end_offset == 5
    assert restore_high_watermark(plog, {("events", 0): 3}) == 3 == plog.high_watermark
    assert restore_high_watermark(plog, {("events", 0): 9}) == 5  # the checkpoint is ahead of the log: a lost tail
    assert restore_high_watermark(plog, {("other", 0): 4}) == 0  # no entry: 0
    plog.update_high_watermark(5)
    plog.delete_records(2)
    assert restore_high_watermark(plog, {("events", 0): 1}) == 2  # never below the log start


def test_a_missing_or_malformed_file_reads_as_no_high_watermarks(tmp_path: Path) -> None:
    checkpoint = HighWatermarkCheckpoint(tmp_path)
    assert checkpoint.read() == {}
    checkpoint.path.write_text("0\n2\nevents 0 3\n")  # two entries announced, one there
    assert checkpoint.read() == {}
