"""The records of a KIP-848 consumer group in ``__consumer_offsets``, byte-compatible with Kafka's.

A key is the int16 record type then the key fields in Kafka's non-flexible encoding; a value is
the int16 value version (0) then a flexible struct (compact strings and arrays, raw UUIDs, a
tagged-field section after every struct). A null value is a tombstone. The types, from Kafka's
group-coordinator/src/main/resources/common/message/ definitions:

====  ======================================  ===================  ==========================================
type  record                                  key                  value
====  ======================================  ===================  ==========================================
3     ConsumerGroupMetadata                   group                group epoch; tag 0: metadata hash
5     ConsumerGroupMemberMetadata             group, member        instance, rack, client, subscription, ...
6     ConsumerGroupTargetAssignmentMetadata   group                assignment epoch
7     ConsumerGroupTargetAssignmentMember     group, member        the member's target partitions
8     ConsumerGroupCurrentMemberAssignment    group, member        epochs, state, assigned, pending revocation
16    ConsumerGroupRegularExpression          group, regex         resolved topics, version, timestamp
====  ======================================  ===================  ==========================================

Type 4 (ConsumerGroupPartitionMetadata) is not written, as in Kafka 4.1+: the metadata hash in
type 3 replaces it; a type 4 found in the log is read and ignored.
"""

from __future__ import annotations

import struct
import uuid
from dataclasses import dataclass, field

from minikafka.broker.internal_records import Reader, RecordFormatError, Writer

GROUP_METADATA = 3
PARTITION_METADATA = 4
MEMBER_METADATA = 5
TARGET_METADATA = 6
TARGET_MEMBER = 7
CURRENT_ASSIGNMENT = 8
REGULAR_EXPRESSION = 16
CONSUMER_RECORD_TYPES = frozenset({3, 4, 5, 6, 7, 8, 16})
_KEY_WITH_SUB = frozenset({MEMBER_METADATA, TARGET_MEMBER, CURRENT_ASSIGNMENT, REGULAR_EXPRESSION})

#: topic id -> partitions
Assignment = dict[uuid.UUID, frozenset[int]]

#: Member states (Kafka's MemberState, stored as an int8).
STABLE = 0
UNREVOKED_PARTITIONS = 1
UNRELEASED_PARTITIONS = 2
UNKNOWN_STATE = 127
STATE_NAMES = {STABLE: "STABLE", UNREVOKED_PARTITIONS: "UNREVOKED_PARTITIONS",
               UNRELEASED_PARTITIONS: "UNRELEASED_PARTITIONS", UNKNOWN_STATE: "UNKNOWN"}


@dataclass(frozen=True, slots=True)
class ConsumerKey:
    """``sub`` is the member id (types 5, 7, 8) or the regular expression (16); None otherwise."""

    type: int
    group: str
    sub: str | None = None

    def encode(self) -> bytes:
        w = Writer().i16(self.type).string(self.group)
        if self.type in _KEY_WITH_SUB:
            w.string(self.sub)
        return bytes(w.buf)


@dataclass(frozen=True, slots=True)
class GroupEpoch:
    """Type 3."""

    epoch: int
    metadata_hash: int = 0


@dataclass(frozen=True, slots=True)
class MemberSubscription:
    """Type 5: who the member is and what it subscribes to."""

    instance_id: str | None
    rack_id: str | None
    client_id: str
    client_host: str
    topic_names: tuple[str, ...]
    regex: str | None
    rebalance_timeout_ms: int
    server_assignor: str | None


@dataclass(frozen=True, slots=True)
class AssignmentEpoch:
    """Type 6."""

    epoch: int


@dataclass(frozen=True, slots=True)
class TargetAssignment:
    """Type 7."""

    partitions: Assignment


@dataclass(frozen=True, slots=True)
class MemberAssignment:
    """Type 8: where the member is in its reconciliation."""

    epoch: int
    previous_epoch: int
    state: int
    assigned: Assignment = field(default_factory=dict)
    pending: Assignment = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class ResolvedRegex:
    """Type 16: the topics a regular expression matched."""

    topics: tuple[str, ...]
    version: int
    timestamp: int


ConsumerValue = GroupEpoch | MemberSubscription | AssignmentEpoch | TargetAssignment | MemberAssignment | ResolvedRegex


@dataclass(frozen=True, slots=True)
class ConsumerRecord:
    """One record; ``value`` None is a tombstone."""

    key: ConsumerKey
    value: ConsumerValue | None

    def encode(self) -> tuple[bytes, bytes | None]:
        return self.key.encode(), None if self.value is None else encode_value(self.value)


# --------------------------------------------------------------------------- encoding

_I64 = struct.Struct(">q")


def _partitions(w: Writer, assignment: Assignment) -> None:
    items = sorted((tid, ps) for tid, ps in assignment.items() if ps)
    w.uvarint(len(items) + 1)
    for tid, ps in items:
        w.uuid(tid).uvarint(len(ps) + 1)
        for p in sorted(ps):
            w.i32(p)
        w.no_tags()


def encode_value(v: ConsumerValue) -> bytes:
    w = Writer().i16(0)
    if isinstance(v, GroupEpoch):
        w.i32(v.epoch)
        if v.metadata_hash:
            w.uvarint(1).uvarint(0).uvarint(8)
            w.buf += _I64.pack(v.metadata_hash)
            return bytes(w.buf)
    elif isinstance(v, MemberSubscription):
        w.compact_string(v.instance_id).compact_string(v.rack_id).compact_string(v.client_id)
        w.compact_string(v.client_host).uvarint(len(v.topic_names) + 1)
        for name in v.topic_names:
            w.compact_string(name)
        w.compact_string(v.regex).i32(v.rebalance_timeout_ms).compact_string(v.server_assignor)
    elif isinstance(v, AssignmentEpoch):
        w.i32(v.epoch)
    elif isinstance(v, TargetAssignment):
        _partitions(w, v.partitions)
    elif isinstance(v, MemberAssignment):
        w.i32(v.epoch).i32(v.previous_epoch).i8(v.state)
        _partitions(w, v.assigned)
        _partitions(w, v.pending)
    else:
        w.uvarint(len(v.topics) + 1)
        for name in v.topics:
            w.compact_string(name)
        w.i64(v.version).i64(v.timestamp)
    return bytes(w.no_tags().buf)


# --------------------------------------------------------------------------- decoding


def parse_consumer_key(record_type: int, r: Reader) -> ConsumerKey:
    """The rest of a key whose type (already read) is one of :data:`CONSUMER_RECORD_TYPES`."""
    group = r.required_string()
    return ConsumerKey(record_type, group, r.required_string() if record_type in _KEY_WITH_SUB else None)


def _read_partitions(r: Reader) -> Assignment:
    out: Assignment = {}
    for _ in range(max(r.compact_length(), 0)):
        tid = r.uuid()
        out[tid] = frozenset(r.i32() for _ in range(max(r.compact_length(), 0)))
        r.tags()
    return out


def _read_names(r: Reader) -> tuple[str, ...]:
    return tuple(r.compact_string() or "" for _ in range(max(r.compact_length(), 0)))


def parse_consumer_value(record_type: int, data: bytes) -> ConsumerValue | None:
    """The value of a record of ``record_type``; None for the ignored type 4."""
    r = Reader(data)
    version = r.i16()
    if version != 0:
        raise RecordFormatError(f"unknown value version {version} of record type {record_type}")
    if record_type == PARTITION_METADATA:
        return None
    value: ConsumerValue
    if record_type == GROUP_METADATA:
        epoch = r.i32()
        tags = r.tags()
        raw = tags.get(0)
        return GroupEpoch(epoch, _I64.unpack(raw)[0] if raw is not None and len(raw) == 8 else 0)
    if record_type == MEMBER_METADATA:
        instance, rack, client, host = r.compact_string(), r.compact_string(), r.compact_string(), r.compact_string()
        names = _read_names(r)
        value = MemberSubscription(instance, rack, client or "", host or "", names, r.compact_string(), r.i32(),
                                   r.compact_string())
    elif record_type == TARGET_METADATA:
        value = AssignmentEpoch(r.i32())
    elif record_type == TARGET_MEMBER:
        value = TargetAssignment(_read_partitions(r))
    elif record_type == CURRENT_ASSIGNMENT:
        epoch, previous, state = r.i32(), r.i32(), r.i8()
        value = MemberAssignment(epoch, previous, state, _read_partitions(r), _read_partitions(r))
    else:
        value = ResolvedRegex(_read_names(r), r.i64(), r.i64())
    r.tags()
    return value
