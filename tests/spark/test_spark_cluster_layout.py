"""Which replica of a cluster's data dir the Spark reader takes for each partition, and where it
stops (no Spark: the planner over real directories laid out as ``minikafka serve --brokers N``
lays them out, with the controller's records written by hand)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from minikafka.spark_export.errors import ExportOptionError
from minikafka.spark_export.files import LocalFiles
from minikafka.spark_export.layout import list_partitions
from minikafka.spark_export.options import parse_options
from minikafka.spark_export.planner import plan_ranges
from minikafka.storage.checkpoints import write_offset_checkpoint
from tests.spark.spark_helpers import LogDirWriter, build_batch

T0 = 1_700_000_000_000


def cluster_dir(root: Path, partitions: list[dict[str, object]], hosted: dict[int, dict[int, int]]) -> Path:
    """A cluster data dir: topic ``t`` with ``partitions`` records; ``hosted[node][partition]`` is
    the number of records of broker ``node``'s replica (its high watermark is checkpointed as that
    count minus one, so the last record of every replica is not committed)."""
    doc = {"version": 1, "cluster_id": "c", "topics": [{"name": "t", "id": "00000000-0000-0000-0000-000000000001",
                                                       "configs": {}, "partitions": partitions}]}
    (root / "cluster-metadata.json").parent.mkdir(parents=True, exist_ok=True)
    (root / "cluster-metadata.json").write_text(json.dumps(doc))
    for node, replicas in hosted.items():
        writer = LogDirWriter(str(root / f"node-{node}"))
        for partition, count in replicas.items():
            for i in range(count):
                writer.append("t", partition, build_batch([(b"k", b"n%d-%d" % (node, i), T0 + i, [])]))
        writer.close()
        write_offset_checkpoint(root / f"node-{node}" / "replication-offset-checkpoint",
                                {("t", p): n - 1 for p, n in replicas.items() if n})
    return root


def record(replicas: list[int], isr: list[int], leader: int) -> dict[str, object]:
    return {"replicas": replicas, "isr": isr, "leader": leader, "leader_epoch": 3, "partition_epoch": 5}


def test_the_leader_else_the_most_complete_in_sync_replica_up_to_its_high_watermark(tmp_path: Path) -> None:
    root = cluster_dir(tmp_path / "c", [
        record([1, 2, 3], [1, 2], 2),   # 0: an in-sync follower whose high watermark is above the leader's
        record([1, 2, 3], [2, 3], -1),  # 1: no leader: the in-sync replica with the highest high watermark
        record([1, 2, 3], [1, 3], 1),   # 2: the leader's dir lacks it: an in-sync replica
        record([2, 3], [3, 2], -1),     # 3: a tie: the first in the ISR's order
        record([1], [1], 1),            # 4: on no broker's disk: left out
        record([1, 2], [1], -1),        # 5: no in-sync replica on disk: any replica
        record([1, 2], [1, 2], 2),      # 6: a tie: the leader
    ], {1: {0: 9, 1: 9, 6: 4}, 2: {0: 6, 1: 5, 3: 4, 5: 3, 6: 4}, 3: {0: 3, 1: 7, 2: 8, 3: 4}})
    chosen = {p.partition: (p.replica, p.high_watermark) for p in list_partitions(LocalFiles(str(root)))}
    assert chosen == {0: (1, 8), 1: (3, 6), 2: (3, 7), 3: (3, 3), 5: (2, 2), 6: (2, 3)}

    ranges, slices = plan_ranges(parse_options({"path": str(root)}))
    assert {r.pdir.partition: (r.start, r.end) for r in ranges} == {0: (0, 8), 1: (0, 6), 2: (0, 7), 3: (0, 3),
                                                                     5: (0, 2), 6: (0, 3)}
    assert all(f"/node-{chosen[s.partition][0]}/" in s.log_path for s in slices)  # one replica per partition


def test_a_replica_without_a_checkpoint_entry_reads_nothing(tmp_path: Path) -> None:
    root = cluster_dir(tmp_path / "c", [record([1], [1], 1)], {1: {0: 4}})
    write_offset_checkpoint(root / "node-1" / "replication-offset-checkpoint", {})
    ranges, _ = plan_ranges(parse_options({"path": str(root)}))
    assert [(r.start, r.end, r.log_end) for r in ranges] == [(0, 0, 0)]


def test_an_unreadable_cluster_metadata_file_is_a_clear_error(tmp_path: Path) -> None:
    root = cluster_dir(tmp_path / "c", [record([1], [1], 1)], {1: {0: 1}})
    (root / "cluster-metadata.json").write_text('{"topics": [{"name": "t"}]}')
    with pytest.raises(ExportOptionError, match="is not a minikafka cluster metadata file"):
        plan_ranges(parse_options({"path": str(root)}))
