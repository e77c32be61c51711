"""The on-disk format rules that the broker's storage and the Spark reader both follow.

One data directory holds one ``<topic>-<partition>`` directory per partition; in it, every segment
is a set of files named by its base offset as 20 digits (``00000000000000000042.log`` with its
``.index``, ``.timeindex`` and ``.txnindex``) and producer snapshots are ``<offset>.snapshot``.
Offset checkpoints are Kafka's text format (version line, count line, ``topic partition offset``
lines). Which names are legal topics and which topics are internal decides what the broker serves
and what the reader exports, so both import these rules from here (Kafka:
``clients/src/main/java/org/apache/kafka/common/internals/Topic.java``,
``storage/src/main/java/org/apache/kafka/storage/internals/log/LogFileUtils.java``,
``server-common/src/main/java/org/apache/kafka/server/common/CheckpointFile.java``).

Kept free of heavy imports: the Spark reader loads it on every executor.
"""

from __future__ import annotations

import re

#: A partition by topic name and number: the key of every per-partition table, in storage, the
#: broker and the Spark reader alike (Kafka's ``TopicPartition``).
TopicPartition = tuple[str, int]

# ----------------------------------------------------------------------------- topic names

MAX_TOPIC_NAME_LENGTH = 249
_LEGAL_TOPIC = re.compile(r"[a-zA-Z0-9._-]+")
#: Topics the broker itself writes. Only these are internal: a user topic may start with ``__``.
INTERNAL_TOPICS = frozenset({"__consumer_offsets", "__transaction_state", "__share_group_state"})


def topic_name_error(name: str | None) -> str | None:
    """Why ``name`` is not a legal topic name, or None when it is."""
    if not name:
        return "topic name is empty"
    if name in (".", ".."):
        return f"topic name cannot be {name!r}"
    if len(name) > MAX_TOPIC_NAME_LENGTH:
        return f"topic name is longer than {MAX_TOPIC_NAME_LENGTH} characters"
    if not _LEGAL_TOPIC.fullmatch(name):
        return "topic name may only contain ASCII letters, digits, '.', '_' and '-'"
    return None


def is_internal_topic(name: str) -> bool:
    return name in INTERNAL_TOPICS


# ----------------------------------------------------------------------------- file names

LOG_SUFFIX = ".log"
INDEX_SUFFIX = ".index"
TIME_INDEX_SUFFIX = ".timeindex"
TXN_INDEX_SUFFIX = ".txnindex"
SNAPSHOT_SUFFIX = ".snapshot"
#: The files of one segment besides its ``.log``.
SEGMENT_INDEX_SUFFIXES = (INDEX_SUFFIX, TIME_INDEX_SUFFIX, TXN_INDEX_SUFFIX)

#: A partition directory: a topic name, a dash, the partition number.
PARTITION_DIR = re.compile(r"^(?P<topic>[a-zA-Z0-9._-]{1,249})-(?P<partition>\d+)$")
SEGMENT_LOG_NAME = re.compile(r"^(\d{20})\.log$")
SNAPSHOT_NAME = re.compile(r"^(\d{20})\.snapshot$")
#: A cluster broker's high watermarks, one line per replica it hosts (Kafka's name, Kafka's format).
REPLICATION_OFFSET_CHECKPOINT = "replication-offset-checkpoint"


def offset_file_name(offset: int, suffix: str) -> str:
    """``00000000000000000042.log`` style names shared by every per-segment file."""
    return f"{offset:020d}{suffix}"


def parse_partition_dir_name(name: str) -> TopicPartition | None:
    """``orders-3`` -> ``("orders", 3)``; None for anything that is not a partition directory."""
    match = PARTITION_DIR.match(name)
    if match is None or match["topic"] in (".", ".."):
        return None
    return match["topic"], int(match["partition"])


# ----------------------------------------------------------------------------- checkpoints


def parse_offset_checkpoint(text: str) -> dict[TopicPartition, int]:
    """The entries of an offset checkpoint file's text; ValueError when it is malformed."""
    try:
        lines = text.splitlines()
        if not lines or lines[0].strip() != "0":
            raise ValueError(f"unknown version {lines[0] if lines else None!r}")
        count = int(lines[1])
        entries = [line.split() for line in lines[2:] if line.strip()]
        if len(entries) != count:
            raise ValueError(f"{len(entries)} entries where {count} were announced")
        out: dict[TopicPartition, int] = {}
        for fields in entries:
            if len(fields) != 3:
                raise ValueError(f"malformed line {' '.join(fields)!r}")
            out[(fields[0], int(fields[1]))] = int(fields[2])
        return out
    except IndexError as e:
        raise ValueError(str(e)) from e


def format_offset_checkpoint(offsets: dict[TopicPartition, int]) -> str:
    lines = ["0", str(len(offsets))]
    lines += [f"{topic} {partition} {offset}" for (topic, partition), offset in sorted(offsets.items())]
    return "\n".join(lines) + "\n"
