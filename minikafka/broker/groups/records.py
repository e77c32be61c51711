"""The record schemas of ``__consumer_offsets``, byte-compatible with Kafka's.

Keys and values use the encoding of :mod:`minikafka.broker.internal_records` (Kafka's
non-flexible one, an int16 schema version first). Two key kinds:

- offset commit, key version 1: ``group, topic, partition``; its value, ``OffsetCommitValue``
  version 3 (``offset, leader_epoch, metadata, commit_timestamp``) or version 1 when the commit
  carried an explicit retention (``offset, metadata, commit_timestamp, expire_timestamp``);
- group metadata, key version 2: ``group``; its value, ``GroupMetadataValue`` version 3
  (protocol type, generation, protocol, leader, state timestamp and the members);
- the records of KIP-848 consumer groups, key versions 3-8 and 16 (:mod:`.consumer_records`).

A null value is a tombstone: the key is deleted. minikafka writes exactly these versions and
reads versions 0-3 of both values, so the log can be inspected with Kafka's own tools.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from minikafka.broker.groups.consumer_records import CONSUMER_RECORD_TYPES, ConsumerKey, parse_consumer_key
from minikafka.broker.internal_records import Reader, RecordFormatError, Writer

OFFSETS_TOPIC = "__consumer_offsets"

OFFSET_KEY_VERSIONS = (0, 1)
GROUP_KEY_VERSION = 2


@dataclass(frozen=True, slots=True)
class CommittedOffset:
    offset: int
    leader_epoch: int  # -1 when unknown
    metadata: str
    commit_timestamp: int
    expire_timestamp: int = -1  # only set by OffsetCommit v2-v4 with an explicit retention


@dataclass(slots=True)
class MemberIdentity:
    """Who a group member is, and its timeouts: what a live member and its stored record share."""

    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    rebalance_timeout_ms: int
    session_timeout_ms: int


@dataclass(slots=True)
class StoredMember(MemberIdentity):
    subscription: bytes
    assignment: bytes


@dataclass(slots=True)
class StoredGroup:
    protocol_type: str
    generation: int
    protocol: str | None
    leader: str | None
    state_timestamp: int  # -1 when unknown
    members: list[StoredMember] = field(default_factory=list)


@dataclass(frozen=True, slots=True)
class OffsetKey:
    group: str
    topic: str
    partition: int


@dataclass(frozen=True, slots=True)
class GroupKey:
    group: str


# --------------------------------------------------------------------------- encoding


def offset_key(group: str, topic: str, partition: int) -> bytes:
    return bytes(Writer().i16(1).string(group).string(topic).i32(partition).buf)


def group_key(group: str) -> bytes:
    return bytes(Writer().i16(GROUP_KEY_VERSION).string(group).buf)


def offset_value(c: CommittedOffset) -> bytes:
    w = Writer()
    if c.expire_timestamp >= 0:
        w.i16(1).i64(c.offset).string(c.metadata).i64(c.commit_timestamp).i64(c.expire_timestamp)
    else:
        w.i16(3).i64(c.offset).i32(c.leader_epoch).string(c.metadata).i64(c.commit_timestamp)
    return bytes(w.buf)


def group_value(g: StoredGroup) -> bytes:
    w = Writer().i16(3).string(g.protocol_type).i32(g.generation).string(g.protocol).string(g.leader)
    w.i64(g.state_timestamp).i32(len(g.members))
    for m in g.members:
        w.string(m.member_id).string(m.group_instance_id).string(m.client_id).string(m.client_host)
        w.i32(m.rebalance_timeout_ms).i32(m.session_timeout_ms).bytes_(m.subscription).bytes_(m.assignment)
    return bytes(w.buf)


# --------------------------------------------------------------------------- decoding


def parse_key(data: bytes) -> OffsetKey | GroupKey | ConsumerKey:
    r = Reader(data)
    version = r.i16()
    if version in OFFSET_KEY_VERSIONS:
        return OffsetKey(r.required_string(), r.required_string(), r.i32())
    if version == GROUP_KEY_VERSION:
        return GroupKey(r.required_string())
    if version in CONSUMER_RECORD_TYPES:  # a KIP-848 consumer group's record (consumer_records.py)
        return parse_consumer_key(version, r)
    raise RecordFormatError(f"unknown key version {version}")


def parse_offset_value(data: bytes) -> CommittedOffset:
    r = Reader(data)
    version = r.i16()
    if version not in (0, 1, 2, 3):
        raise RecordFormatError(f"unknown offset commit value version {version}")
    offset = r.i64()
    epoch = r.i32() if version >= 3 else -1
    metadata = r.string() or ""
    commit_ts = r.i64()
    expire_ts = r.i64() if version == 1 else -1
    return CommittedOffset(offset, epoch, metadata, commit_ts, expire_ts)


def parse_group_value(data: bytes) -> StoredGroup:
    r = Reader(data)
    version = r.i16()
    if version not in (0, 1, 2, 3):
        raise RecordFormatError(f"unknown group metadata value version {version}")
    protocol_type = r.string() or ""
    generation = r.i32()
    protocol = r.string()
    leader = r.string()
    state_ts = r.i64() if version >= 2 else -1
    count = r.i32()
    if count < 0 or count > len(data):
        raise RecordFormatError(f"bad member count {count}")
    members = []
    for _ in range(count):
        member_id = r.required_string()
        instance_id = r.string() if version >= 3 else None
        client_id = r.string() or ""
        client_host = r.string() or ""
        rebalance = r.i32() if version >= 1 else -1
        session = r.i32()
        if version == 0:
            rebalance = session
        members.append(StoredMember(member_id, instance_id, client_id, client_host, rebalance, session,
                                    r.bytes_(), r.bytes_()))
    return StoredGroup(protocol_type, generation, protocol, leader, state_ts, members)
