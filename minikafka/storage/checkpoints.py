"""Small metadata files of a data directory, in Kafka's formats (docs/semantics.md#metadata-files).

* ``recovery-point-offset-checkpoint`` / ``log-start-offset-checkpoint``: ``0``, entry count, then
  ``<topic> <partition> <offset>`` lines;
* ``meta.properties``: Java properties with ``version=1``, ``cluster.id``, ``node.id``;
* ``<topic>-<n>/partition.metadata``: ``version: 0`` and ``topic_id: <base64url uuid>``;
* ``.kafka_cleanshutdown``: present only between a clean shutdown and the next start.

Every file is written to ``<name>.tmp``, fsynced, renamed over the old one, and the directory fsynced,
so a crash leaves either the old or the new version.
"""

from __future__ import annotations

import base64
import json
import logging
import time
import uuid
from pathlib import Path

from minikafka.storage.atomic_files import atomic_write, fsync_dir
from minikafka.storage.disk_format import TopicPartition, format_offset_checkpoint, parse_offset_checkpoint

log = logging.getLogger(__name__)

RECOVERY_POINT_CHECKPOINT = "recovery-point-offset-checkpoint"
LOG_START_OFFSET_CHECKPOINT = "log-start-offset-checkpoint"
META_PROPERTIES = "meta.properties"
PARTITION_METADATA = "partition.metadata"
CLEAN_SHUTDOWN_MARKER = ".kafka_cleanshutdown"


# ---------------------------------------------------------------------- uuids


def uuid_to_base64(value: uuid.UUID) -> str:
    """Kafka's textual form of a Uuid: URL-safe base64 of the 16 bytes, no padding (22 chars)."""
    return base64.urlsafe_b64encode(value.bytes).decode("ascii").rstrip("=")


def base64_to_uuid(text: str) -> uuid.UUID:
    raw = base64.urlsafe_b64decode(text.strip() + "==")
    if len(raw) != 16:
        raise ValueError(f"not a 16-byte uuid: {text!r}")
    return uuid.UUID(bytes=raw)


def random_kafka_uuid() -> uuid.UUID:
    """A random UUID that is neither zero nor starts with '-' in base64 form (Kafka avoids both)."""
    while True:
        value = uuid.uuid4()
        if value.int != 0 and not uuid_to_base64(value).startswith("-"):
            return value


# ---------------------------------------------------------------------- offset checkpoints


def write_offset_checkpoint(path: Path, offsets: dict[TopicPartition, int]) -> None:
    atomic_write(path, format_offset_checkpoint(offsets).encode())


def read_offset_checkpoint(path: Path) -> dict[TopicPartition, int]:
    """The entries of a checkpoint file; empty (with a warning) if it is missing or malformed."""
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return {}
    except (OSError, UnicodeDecodeError) as e:
        log.warning("cannot read %s (%s): treating it as empty", path, e)
        return {}
    try:
        return parse_offset_checkpoint(text)
    except ValueError as e:
        log.warning("malformed checkpoint file %s (%s): treating it as empty", path, e)
        return {}


# ---------------------------------------------------------------------- meta.properties


def read_properties(path: Path) -> dict[str, str]:
    out: dict[str, str] = {}
    for line in path.read_text(encoding="utf-8").splitlines():
        line = line.strip()
        if not line or line.startswith(("#", "!")):
            continue
        sep = min((i for i in (line.find("="), line.find(":")) if i >= 0), default=-1)
        if sep < 0:
            continue
        out[line[:sep].strip()] = line[sep + 1 :].strip()
    return out


def write_meta_properties(path: Path, cluster_id: str, node_id: int) -> None:
    stamp = time.strftime("%a %b %d %H:%M:%S %Z %Y")
    text = f"#\n#{stamp}\nnode.id={node_id}\nversion=1\ncluster.id={cluster_id}\n"
    atomic_write(path, text.encode())


# ---------------------------------------------------------------------- partition.metadata


def write_partition_metadata(directory: Path, topic_id: uuid.UUID) -> None:
    if topic_id.int == 0:
        raise ValueError("the zero uuid is not a valid topic id")
    # Not fsynced: the topic id is durable in the topic catalogue, and loading rewrites this file
    # when it is missing or disagrees (creating thousands of partitions must not cost seconds).
    atomic_write(directory / PARTITION_METADATA, f"version: 0\ntopic_id: {uuid_to_base64(topic_id)}".encode(),
                 durable=False)


def read_partition_metadata(directory: Path) -> uuid.UUID | None:
    """The topic id in ``partition.metadata``, or None if it is missing or unreadable."""
    path = directory / PARTITION_METADATA
    try:
        fields = read_properties(path)
        if fields.get("version") != "0":
            raise ValueError(f"unknown version {fields.get('version')!r}")
        value = base64_to_uuid(fields["topic_id"])
        if value.int == 0:
            raise ValueError("zero topic id")
        return value
    except FileNotFoundError:
        return None
    except (OSError, ValueError, KeyError, UnicodeDecodeError) as e:
        log.warning("unreadable %s: %s", path, e)
        return None


# ---------------------------------------------------------------------- clean shutdown marker


def write_clean_shutdown_marker(data_dir: Path, broker_epoch: int = 0) -> None:
    atomic_write(data_dir / CLEAN_SHUTDOWN_MARKER, json.dumps({"version": 0, "brokerEpoch": broker_epoch}).encode())


def consume_clean_shutdown_marker(data_dir: Path) -> bool:
    """Whether the last shutdown was clean. The marker is deleted (and the deletion made durable)
    at once, so a crash while loading counts as unclean next time."""
    path = data_dir / CLEAN_SHUTDOWN_MARKER
    if not path.exists():
        return False
    path.unlink()
    fsync_dir(data_dir)
    return True
