"""The topic settings a partition log reads on its hot paths, converted once per config change.

:class:`LogSettings` is built from a topic's effective config (``config.topic_config``) when the
log opens and on every AlterConfigs; appends, rolls, retention and the loader read its fields
instead of looking names up in a dict for every batch.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from minikafka.config import LONG_MAX, timestamp_bounds, topic_config
from minikafka.storage.recompress import TOPIC_CODECS


@dataclass(slots=True)
class LogSettings:
    """The topic settings the hot paths read, converted once per config change."""

    max_message_bytes: int
    segment_bytes: int
    segment_ms: int
    index_max_bytes: int
    index_interval_bytes: int
    log_append_time: bool
    before_max_ms: int
    after_max_ms: int
    compacted: bool
    deletes: bool  # cleanup.policy includes "delete": retention.ms/bytes apply
    flush_messages: int
    flush_ms: int
    retention_ms: int
    retention_bytes: int
    codec: int | None  # compression.type as a codec id; None for "producer" (keep the client's)

    decodes_records: bool = False  # bounded timestamps or compaction: an append decodes the records

    def __post_init__(self) -> None:
        self.decodes_records = self.bounded_timestamps or self.compacted

    @property
    def bounded_timestamps(self) -> bool:
        return self.before_max_ms < LONG_MAX or self.after_max_ms < LONG_MAX

    @classmethod
    def from_config(cls, config: dict[str, Any]) -> LogSettings:
        def num(name: str) -> int:
            return int(topic_config(config, name))

        def text(name: str) -> str:
            return str(topic_config(config, name))

        policy = text("cleanup.policy")
        compacted = "compact" in policy
        return cls(
            max_message_bytes=num("max.message.bytes"),
            segment_bytes=num("segment.bytes"),
            # a compacted topic rolls by max.compaction.lag.ms too, so the cleaner can reach its records
            segment_ms=min(num("segment.ms"), num("max.compaction.lag.ms") if compacted else LONG_MAX),
            index_max_bytes=num("segment.index.bytes"),
            index_interval_bytes=num("index.interval.bytes"),
            log_append_time=text("message.timestamp.type") == "LogAppendTime",
            before_max_ms=timestamp_bounds(config)[0],
            after_max_ms=timestamp_bounds(config)[1],
            compacted=compacted,
            deletes="delete" in policy,
            flush_messages=num("flush.messages"),
            flush_ms=num("flush.ms"),
            retention_ms=num("retention.ms"),
            retention_bytes=num("retention.bytes"),
            codec=TOPIC_CODECS.get(text("compression.type")),
        )
