"""The controller's records on disk: ``<data-dir>/cluster-metadata.json``, rewritten on every change
(topics with their partitions and overrides, and the groups' dynamic configs).

Kafka keeps its controller's decisions in the KRaft metadata log, so a cluster that restarts keeps
its topic ids, assignments, ISRs and epochs. minikafka's controller writes its whole state as one
JSON file instead (atomically, fsynced: changes are rare, one per election or ISR change). Epochs
must survive a restart: clients ignore metadata whose leader epoch is lower than one they have
seen, and replicas compare epochs to find where their logs diverge. Broker states are not kept:
after a restart every broker is fenced until it registers again, as in Kafka.
"""

from __future__ import annotations

import json
import uuid
from pathlib import Path
from typing import Any

from minikafka.broker.cluster.controller import Controller, TopicRecord
from minikafka.broker.cluster.partition_state import PartitionRegistration
from minikafka.storage.atomic_files import atomic_write

METADATA_FILE = "cluster-metadata.json"
_VERSION = 1


class MetadataFileError(ValueError):
    """A metadata file that cannot be read back (its path and why)."""


def encode(controller: Controller) -> bytes:
    topics = []
    for topic in controller.topics.values():
        parts = [controller.partitions[(topic.name, p)] for p in range(topic.partitions)]
        topics.append({"name": topic.name, "id": str(topic.topic_id), "configs": topic.configs, "partitions": [
            {"replicas": list(p.replicas), "isr": list(p.isr), "leader": p.leader, "leader_epoch": p.leader_epoch,
             "partition_epoch": p.partition_epoch} for p in parts]})
    return json.dumps({"version": _VERSION, "cluster_id": controller.cluster_id, "topics": topics,
                       "group_configs": controller.group_configs}, indent=1).encode()


def restore(controller: Controller, data: bytes, where: str = METADATA_FILE) -> None:
    """Put the topics and partition records of ``data`` into ``controller`` (which has none yet)."""
    try:
        doc = json.loads(data)
        if doc.get("version") != _VERSION:
            raise MetadataFileError(f"{where}: unknown version {doc.get('version')!r}")
        controller.cluster_id = str(doc["cluster_id"])
        for t in doc["topics"]:
            parts = [_partition(p) for p in t["partitions"]]
            controller.topics[t["name"]] = TopicRecord(t["name"], uuid.UUID(t["id"]), len(parts),
                                                       {str(k): str(v) for k, v in t.get("configs", {}).items()})
            for i, part in enumerate(parts):
                unknown = [r for r in part.replicas if r not in controller.brokers]
                if unknown:
                    raise MetadataFileError(f"{where}: {t['name']}-{i} has replicas on brokers {unknown}, but the "
                                            f"cluster has brokers {sorted(controller.brokers)}")
                controller.partitions[(t["name"], i)] = part
        controller.group_configs = {str(g): {str(k): str(v) for k, v in configs.items()}
                                    for g, configs in doc.get("group_configs", {}).items()}
    except (ValueError, KeyError, TypeError, AttributeError) as exc:
        if isinstance(exc, MetadataFileError):
            raise
        raise MetadataFileError(f"{where}: not a minikafka cluster metadata file ({exc})") from exc


def _partition(p: dict[str, Any]) -> PartitionRegistration:
    return PartitionRegistration(replicas=tuple(int(r) for r in p["replicas"]), isr=tuple(int(r) for r in p["isr"]),
                                 leader=int(p["leader"]), leader_epoch=int(p["leader_epoch"]),
                                 partition_epoch=int(p["partition_epoch"]))


class MetadataFile:
    """Where one cluster's controller keeps its records."""

    def __init__(self, data_dir: Path) -> None:
        self.path = data_dir / METADATA_FILE

    def load_into(self, controller: Controller) -> bool:
        """Restore ``controller`` from the file; False when there is none yet (a new cluster)."""
        try:
            data = self.path.read_bytes()
        except FileNotFoundError:
            return False
        restore(controller, data, str(self.path))
        return True

    def save(self, controller: Controller) -> None:
        atomic_write(self.path, encode(controller))
