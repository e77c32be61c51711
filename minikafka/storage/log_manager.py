"""The data directory: identity, topic catalogue, checkpoints and one PartitionLog per partition.

Layout (Kafka's, docs/semantics.md#on-disk-layout, plus one minikafka file)::

    <data-dir>/.lock                               held (flock) while a broker has the dir open
    <data-dir>/meta.properties                     version=1, cluster.id, node.id
    <data-dir>/.kafka_cleanshutdown                only between a clean shutdown and the next start
    <data-dir>/recovery-point-offset-checkpoint
    <data-dir>/log-start-offset-checkpoint
    <data-dir>/minikafka-topics.json               topic catalogue: name, id, partition count, overrides
    <data-dir>/minikafka-group-configs.json        groups' dynamic configs (minikafka.broker.group_configs)
    <data-dir>/<topic>-<n>/                        one PartitionLog each

minikafka has no controller quorum, so the catalogue file is its metadata log: written atomically,
it is the source of truth for which topics exist. A partition directory whose topic is not in the
catalogue is left over from a create or delete that crashed half-way, and is removed at load.
"""

from __future__ import annotations

import json
import logging
import os
import re
import shutil
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from minikafka.clock import wall_clock_ms
from minikafka.config import BrokerConfig, parse_topic_configs
from minikafka.errors import ErrorCode, KafkaError
from minikafka.startup_errors import DataDirError
from minikafka.storage import checkpoints as ckpt
from minikafka.storage.atomic_files import atomic_write
from minikafka.storage.dir_lock import DataDirLock
from minikafka.storage.disk_format import (
    PARTITION_DIR,
    TopicPartition,
    parse_partition_dir_name,
    topic_name_error,
)
from minikafka.storage.log import PartitionLog

log = logging.getLogger(__name__)

CATALOGUE = "minikafka-topics.json"
_DELETE_DIR = re.compile(r"^.+-\d+\.[0-9a-f]{32}-delete$")


def check_topic_name(name: str) -> None:
    """Refuse any name that could escape the data dir or that Kafka would not accept."""
    if not isinstance(name, str) or topic_name_error(name) is not None:
        raise ValueError(f"illegal topic name {name!r}")


def _why_not_writable(path: Path) -> str:
    """Name the user the broker runs as (in a container, often not the one who made the directory)
    and the directory's owner, or the read-only mount: what a user needs to fix it."""
    if os.statvfs(path).f_flag & os.ST_RDONLY:
        return f"{path} is on a read-only file system (mount it read-write)"
    uid, gid, owner = os.geteuid(), os.getegid(), path.stat()
    return (f"{path} (owner uid {owner.st_uid}, gid {owner.st_gid}, mode {owner.st_mode & 0o777:o}) is not "
            f"writable by uid {uid} (gid {gid}), the user this broker runs as: give that uid write access "
            f"(chown {uid}:{gid}; for a mounted directory, on the host)")


@dataclass
class TopicInfo:
    name: str
    topic_id: uuid.UUID
    partitions: int
    configs: dict[str, Any] = field(default_factory=dict)  # overrides only, as given
    #: the partitions with a replica in this data dir; None for all (a single broker)
    hosted: list[int] | None = None

    def hosts(self, partition: int) -> bool:
        return partition < self.partitions and (self.hosted is None or partition in self.hosted)


class LogManager:
    """Owns every partition log of one data directory (see the module docstring)."""

    def __init__(
        self,
        data_dir: str | Path,
        broker_config: BrokerConfig,
        now_ms: Callable[[], int] = wall_clock_ms,
        *,
        on_log_opened: Callable[[PartitionLog], None] | None = None,
    ) -> None:
        self.data_dir = Path(data_dir)
        #: applied to every partition log this manager opens or creates, before anyone else sees it
        self.on_log_opened = on_log_opened
        self.broker_config = broker_config
        self.now_ms = now_ms
        self.cluster_id = ""
        self.clean_start = False
        self._topics: dict[str, TopicInfo] = {}
        self._logs: dict[TopicPartition, PartitionLog] = {}
        #: partitions that could not be opened (the broker answers KAFKA_STORAGE_ERROR for them)
        self.offline: dict[TopicPartition, str] = {}
        self._loaded = False
        self._lock = DataDirLock(self.data_dir)

    # ------------------------------------------------------------------ loading

    def check_usable(self) -> None:
        """Refuse a data dir that cannot work (a file, or not writable) without writing anything, so a
        broker that cannot start leaves no trace in it."""
        existing = self.data_dir.absolute()
        while not existing.exists() and existing != existing.parent:
            existing = existing.parent
        if not existing.is_dir():
            what = "is a file" if existing == self.data_dir.absolute() else f"is under {existing}, which is a file"
            raise DataDirError(f"data dir {self.data_dir}: {what}; expected a directory")
        if not os.access(existing, os.W_OK | os.X_OK):
            raise DataDirError(f"data dir {self.data_dir}: {_why_not_writable(existing)}")
        self._read_meta_properties()

    def load(self) -> None:
        """Lock the data dir (no other broker may have it open, :mod:`.dir_lock`), then load it.
        The lock is held until :meth:`shutdown`, :meth:`abandon` or :meth:`unlock`."""
        started = time.monotonic()
        self.data_dir.mkdir(parents=True, exist_ok=True)
        self._lock.acquire()
        try:
            self._load(started)
        except BaseException:
            self.unlock()
            raise

    def unlock(self) -> None:
        """Let another broker open the data dir (a start that failed after :meth:`load`)."""
        self._lock.release()

    def _load(self, started: float) -> None:
        first_start = not (self.data_dir / ckpt.META_PROPERTIES).exists()
        self._load_meta_properties()
        self.clean_start = ckpt.consume_clean_shutdown_marker(self.data_dir)
        recovery_points = ckpt.read_offset_checkpoint(self.data_dir / ckpt.RECOVERY_POINT_CHECKPOINT)
        log_starts = ckpt.read_offset_checkpoint(self.data_dir / ckpt.LOG_START_OFFSET_CHECKPOINT)
        self._topics = self._load_catalogue()
        self._remove_stray_dirs()
        for info in self._topics.values():
            for partition in filter(info.hosts, range(info.partitions)):
                key = (info.name, partition)
                self._open_partition(info, partition, log_starts.get(key, 0),
                                     recovery_points.get(key, 0), self.clean_start)
        self._loaded = True
        unclean = not first_start and not self.clean_start
        how = "first start" if first_start else "clean shutdown" if self.clean_start else \
            "UNCLEAN shutdown: every partition re-validated from its recovery point"
        # After a crash this one line per data dir is the warning; each partition's re-validation is
        # logged at INFO/DEBUG, and only a repair (a cut, a deleted segment) warns on its own.
        log.log(logging.WARNING if unclean or self.offline else logging.INFO,
                "loaded %d partition(s) of %d topic(s) from %s (%s) in %.0f ms%s",
                len(self._logs), len(self._topics), self.data_dir, how,
                (time.monotonic() - started) * 1000,
                f"; {len(self.offline)} offline" if self.offline else "")

    def _read_meta_properties(self) -> dict[str, str]:
        """meta.properties as read (empty when missing or unreadable); refuses another node's dir."""
        path = self.data_dir / ckpt.META_PROPERTIES
        node_id = self.broker_config.node_id
        props: dict[str, str] = {}
        if path.exists():
            try:
                props = ckpt.read_properties(path)
            except (OSError, UnicodeDecodeError) as e:
                log.warning("unreadable %s (%s): writing a new one", path, e)
        if props and "node.id" in props and props["node.id"] != str(node_id):
            raise DataDirError(f"{path} belongs to node.id {props['node.id']}, but this broker is node.id "
                               f"{node_id}; use another data dir or the same node id")
        return props

    def _load_meta_properties(self) -> None:
        path = self.data_dir / ckpt.META_PROPERTIES
        node_id = self.broker_config.node_id
        props = self._read_meta_properties()
        cluster_id = props.get("cluster.id", "")
        try:
            ckpt.base64_to_uuid(cluster_id)
        except ValueError:
            if props:
                log.warning("%s has no valid cluster.id: generating one", path)
            cluster_id = ""
        wanted = self.broker_config.cluster_id  # a cluster's brokers share the controller's
        if wanted and cluster_id and cluster_id != wanted:
            raise DataDirError(f"{path} belongs to cluster {cluster_id}, but this broker joins cluster {wanted}; "
                               "use another data dir")
        if not cluster_id or props.get("version") != "1" or props.get("node.id") != str(node_id):
            cluster_id = cluster_id or wanted or ckpt.uuid_to_base64(ckpt.random_kafka_uuid())
            ckpt.write_meta_properties(path, cluster_id, node_id)
            log.info("wrote %s (cluster.id=%s, node.id=%d)", path, cluster_id, node_id)
        self.cluster_id = cluster_id

    def _load_catalogue(self) -> dict[str, TopicInfo]:
        path = self.data_dir / CATALOGUE
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
            topics: dict[str, TopicInfo] = {}
            for item in data["topics"]:
                check_topic_name(item["name"])
                hosted = item.get("hosted")
                topics[item["name"]] = TopicInfo(item["name"], uuid.UUID(item["topic_id"]),
                                                 int(item["partitions"]), dict(item.get("configs", {})),
                                                 None if hosted is None else [int(p) for p in hosted])
            return topics
        except FileNotFoundError:
            pass
        except (OSError, ValueError, KeyError, TypeError) as e:
            log.error("unreadable topic catalogue %s (%s): rebuilding it from the partition dirs", path, e)
        topics = self._catalogue_from_dirs()
        if topics:
            log.warning("rebuilt the topic catalogue from %d topic dir(s) (config overrides are lost)",
                        len(topics))
            self._write_catalogue(topics)
        return topics

    def _catalogue_from_dirs(self) -> dict[str, TopicInfo]:
        found: dict[str, list[int]] = {}
        for child in self.data_dir.iterdir():
            parsed = parse_partition_dir_name(child.name)
            if child.is_dir() and parsed:
                found.setdefault(parsed[0], []).append(parsed[1])
        topics = {}
        for name, parts in found.items():
            topic_id = ckpt.read_partition_metadata(self.data_dir / f"{name}-{min(parts)}")
            topics[name] = TopicInfo(name, topic_id or ckpt.random_kafka_uuid(), max(parts) + 1, {})
        return topics

    def _write_catalogue(self, topics: dict[str, TopicInfo] | None = None) -> None:
        topics = self._topics if topics is None else topics
        data = {"version": 1, "topics": [
            {"name": t.name, "topic_id": str(t.topic_id), "partitions": t.partitions, "configs": t.configs,
             **({} if t.hosted is None else {"hosted": t.hosted})}
            for t in sorted(topics.values(), key=lambda t: t.name)
        ]}
        atomic_write(self.data_dir / CATALOGUE, json.dumps(data, indent=1).encode())

    def _remove_stray_dirs(self) -> None:
        for child in self.data_dir.iterdir():
            if not child.is_dir():
                continue
            m = PARTITION_DIR.match(child.name)
            stray = _DELETE_DIR.match(child.name) or (
                m is not None and (m["topic"] not in self._topics
                                   or not self._topics[m["topic"]].hosts(int(m["partition"]))))
            if stray:
                log.warning("removing %s: not a partition of any topic in the catalogue", child)
                shutil.rmtree(child, ignore_errors=True)

    def _config_for(self, info: TopicInfo) -> dict[str, Any]:
        config = self.broker_config.topic_defaults()
        config.update(parse_topic_configs(info.configs))
        return config

    def _opened(self, plog: PartitionLog) -> None:
        if self.on_log_opened is not None:
            self.on_log_opened(plog)

    def _producer_settings(self) -> dict[str, Any]:
        """The clock and producer-state bounds every partition log of this broker is opened with."""
        return {
            "now_ms": self.now_ms,
            "producer_expiration_ms": int(self.broker_config.get("producer.id.expiration.ms")),
            "producer_max_entries": int(self.broker_config.get("minikafka.producer.state.max.entries")),
        }

    def _open_partition(self, info: TopicInfo, partition: int, log_start: int, recovery_point: int,
                        clean: bool) -> PartitionLog | None:
        key = (info.name, partition)
        directory = self.data_dir / f"{info.name}-{partition}"
        try:
            if not directory.exists():
                log.warning("%s-%d: partition directory missing: starting it empty", info.name, partition)
            plog = PartitionLog.open(
                info.name, partition, directory, self._config_for(info),
                log_start_offset=log_start, recovery_point=recovery_point, clean=clean,
                **self._producer_settings(),
            )
            stored = ckpt.read_partition_metadata(directory)
            if stored != info.topic_id:
                if stored is not None:
                    log.warning("%s: partition.metadata has topic id %s, the catalogue %s: rewriting it",
                                directory.name, stored, info.topic_id)
                ckpt.write_partition_metadata(directory, info.topic_id)
            if not plog.epochs.entries:  # a new log's leader leads from its start (a cluster's may move on)
                plog.epochs.assign(plog.leader_epoch, plog.log_start_offset)
        except Exception as e:  # one bad partition must not stop the broker
            log.exception("%s-%d: cannot open the partition: it stays offline", info.name, partition)
            self.offline[key] = str(e)
            return None
        self.offline.pop(key, None)
        self._opened(plog)
        self._logs[key] = plog
        return plog

    # ------------------------------------------------------------------ queries

    def topics(self) -> dict[str, TopicInfo]:
        return dict(self._topics)

    def get_log(self, topic: str, partition: int) -> PartitionLog | None:
        return self._logs.get((topic, partition))

    def all_logs(self) -> list[PartitionLog]:
        return list(self._logs.values())

    def topic_config(self, name: str) -> dict[str, Any]:
        """Effective settings of a topic (defaults plus overrides)."""
        return self._config_for(self._topics[name])

    # ------------------------------------------------------------------ changes

    def create_topic(self, name: str, partitions: int, configs: dict[str, str], *,
                     topic_id: uuid.UUID | None = None, hosted: list[int] | None = None) -> TopicInfo:
        """Create a topic; ``ValueError`` for an illegal name or bad configs (INVALID_CONFIG),
        ``KafkaError`` TOPIC_ALREADY_EXISTS / INVALID_PARTITIONS. In a cluster the controller names
        the topic id and which partitions have a replica here (``hosted``)."""
        check_topic_name(name)
        configs = dict(configs or {})
        parse_topic_configs(configs)
        if name in self._topics:
            raise KafkaError(ErrorCode.TOPIC_ALREADY_EXISTS, f"topic {name!r} already exists")
        if not isinstance(partitions, int) or partitions < 1:
            raise KafkaError(ErrorCode.INVALID_PARTITIONS, f"invalid partition count {partitions}")
        info = TopicInfo(name, topic_id or ckpt.random_kafka_uuid(), partitions, configs,
                         None if hosted is None else sorted(hosted))
        created: list[PartitionLog] = []
        try:
            for partition in (range(partitions) if hosted is None else info.hosted or []):
                plog = self._create_partition(info, partition)
                created.append(plog)
            self._topics[name] = info
            self._write_catalogue()
        except BaseException:
            self._topics.pop(name, None)
            for plog in created:
                self._logs.pop((name, plog.partition), None)
                plog.delete()
                shutil.rmtree(plog.dir, ignore_errors=True)
            raise
        log.info("created topic %s (%d partition(s), id %s, overrides %s)", name, partitions,
                 ckpt.uuid_to_base64(info.topic_id), configs)
        return info

    def _create_partition(self, info: TopicInfo, partition: int) -> PartitionLog:
        directory = self.data_dir / f"{info.name}-{partition}"
        if directory.exists():
            log.warning("removing stale directory %s before creating the partition", directory)
            shutil.rmtree(directory)
        directory.mkdir(parents=True)
        ckpt.write_partition_metadata(directory, info.topic_id)
        plog = PartitionLog.open(
            info.name, partition, directory, self._config_for(info), clean=True, **self._producer_settings(),
        )
        # Not fsynced (creating thousands of partitions must not cost seconds): loading writes it again.
        plog.epochs.assign(plog.leader_epoch, 0, durable=False)
        self._opened(plog)
        self._logs[(info.name, partition)] = plog
        return plog

    def delete_topic(self, name: str) -> None:
        """Remove a topic: its logs are closed and its directories deleted."""
        info = self._topics.get(name)
        if info is None:
            raise KafkaError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"unknown topic {name!r}")
        doomed: list[Path] = []
        for partition in range(info.partitions):
            plog = self._logs.pop((name, partition), None)
            self.offline.pop((name, partition), None)
            directory = self.data_dir / f"{name}-{partition}"
            if plog is not None:
                plog.delete()
            if directory.exists():
                target = self.data_dir / f"{name}-{partition}.{uuid.uuid4().hex}-delete"
                directory.rename(target)
                doomed.append(target)
        del self._topics[name]
        self._write_catalogue()
        for path in doomed:
            shutil.rmtree(path, ignore_errors=True)
        log.info("deleted topic %s", name)

    def add_partitions(self, name: str, new_total: int, hosted: list[int] | None = None) -> None:
        """Grow a topic to ``new_total`` partitions; in a cluster ``hosted`` names the new ones with a
        replica here."""
        info = self._topics.get(name)
        if info is None:
            raise KafkaError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"unknown topic {name!r}")
        if new_total <= info.partitions:
            raise KafkaError(ErrorCode.INVALID_PARTITIONS,
                             f"topic {name} has {info.partitions} partitions; cannot go to {new_total}")
        old_total = info.partitions
        info.partitions = new_total
        added = range(old_total, new_total) if info.hosted is None else sorted(hosted or [])
        if info.hosted is not None:
            info.hosted = sorted({*info.hosted, *added})
        for partition in added:
            self._create_partition(info, partition)
        self._write_catalogue()
        log.info("topic %s: partitions %d -> %d", name, old_total, new_total)

    def alter_topic_configs(self, name: str, configs: dict[str, Any], *, incremental: bool = False) -> None:
        """Replace a topic's overrides with ``configs`` (AlterConfigs), or with ``incremental`` merge
        them in, a value of None removing that override (IncrementalAlterConfigs).
        ``ValueError`` for unknown names or bad values; nothing changes then."""
        info = self._topics.get(name)
        if info is None:
            raise KafkaError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"unknown topic {name!r}")
        if incremental:
            merged = dict(info.configs)
            for key, value in configs.items():
                if value is None:
                    merged.pop(key, None)
                else:
                    merged[key] = value
        else:
            merged = {k: v for k, v in configs.items() if v is not None}
        parse_topic_configs(merged)
        info.configs = merged
        self._write_catalogue()
        config = self._config_for(info)
        for partition in range(info.partitions):
            plog = self._logs.get((name, partition))
            if plog is not None:
                plog.update_config(config)
        log.info("topic %s: config overrides now %s", name, merged)

    # ------------------------------------------------------------------ maintenance

    def checkpoint(self) -> None:
        """Write both offset checkpoint files (Kafka's format, atomically)."""
        recovery: dict[TopicPartition, int] = {}
        starts: dict[TopicPartition, int] = {}
        for key, plog in self._logs.items():
            recovery[key] = plog.recovery_point
            segments = plog.segments
            if segments and plog.log_start_offset > segments[0].base_offset:
                starts[key] = plog.log_start_offset
        ckpt.write_offset_checkpoint(self.data_dir / ckpt.RECOVERY_POINT_CHECKPOINT, recovery)
        ckpt.write_offset_checkpoint(self.data_dir / ckpt.LOG_START_OFFSET_CHECKPOINT, starts)

    def apply_retention(self, now_ms: int | None = None) -> int:
        """Run retention on every log; returns the number of segments deleted."""
        now = self.now_ms() if now_ms is None else now_ms
        deleted = 0
        for plog in self.all_logs():
            try:
                deleted += plog.apply_retention(now)
            except (OSError, KafkaError):
                log.exception("%s: retention failed", plog.name)
        return deleted

    def logs_due_for_flush(self, now_ms: int | None = None) -> list[PartitionLog]:
        """Logs whose flush policy (roll, flush.ms) asks for a flush now."""
        now = self.now_ms() if now_ms is None else now_ms
        return [plog for plog in self._logs.values() if plog.flush_due(now)]

    def abandon(self) -> None:
        """Stop as a crash would: no snapshots, checkpoints or clean marker are written."""
        for plog in self.all_logs():
            plog.abandon()
        self._logs.clear()
        self.unlock()
        # Only a simulated crash (the test kit's) abandons the logs: asked for, so not a warning.
        log.info("%s abandoned without a clean shutdown", self.data_dir)

    def shutdown(self) -> None:
        """Close every log (snapshot at its LEO, fsync), write checkpoints, then the clean marker."""
        all_closed = True
        for plog in self.all_logs():
            try:
                plog.close()
            except Exception:
                all_closed = False
                log.exception("%s: close failed", plog.name)
        try:
            self.checkpoint()
        except OSError:
            all_closed = False
            log.exception("cannot write the offset checkpoints")
        if all_closed and not self.offline:
            ckpt.write_clean_shutdown_marker(self.data_dir)
            log.info("clean shutdown of %s", self.data_dir)
        else:
            log.warning("shutdown of %s was not clean: the next start will recover", self.data_dir)
        self._logs.clear()
        self.unlock()
