"""The record schemas of ``__consumer_offsets``, byte-compatible with Kafka's.

Every record key and value starts with an int16 schema version; strings are int16-length UTF-8,
byte arrays int32-length, everything big-endian (Kafka's non-flexible encoding). Two key kinds:

- offset commit, key version 1: ``group, topic, partition``; its value, ``OffsetCommitValue``
  version 3 (``offset, leader_epoch, metadata, commit_timestamp``) or version 1 when the commit
  carried an explicit retention (``offset, metadata, commit_timestamp, expire_timestamp``);
- group metadata, key version 2: ``group``; its value, ``GroupMetadataValue`` version 3
  (protocol type, generation, protocol, leader, state timestamp and the members).

A null value is a tombstone: the key is deleted. minikafka writes exactly these versions and
reads versions 0-3 of both values, so the log can be inspected with Kafka's own tools.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass, field

OFFSETS_TOPIC = "__consumer_offsets"

OFFSET_KEY_VERSIONS = (0, 1)
GROUP_KEY_VERSION = 2
_MAX_STRING = 32767

_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")
_I64 = struct.Struct(">q")


class RecordFormatError(ValueError):
    """A key or value that does not follow the schemas above."""


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


class _Writer:
    def __init__(self) -> None:
        self.buf = bytearray()

    def i16(self, v: int) -> _Writer:
        self.buf += _I16.pack(v)
        return self

    def i32(self, v: int) -> _Writer:
        self.buf += _I32.pack(v)
        return self

    def i64(self, v: int) -> _Writer:
        self.buf += _I64.pack(v)
        return self

    def string(self, v: str | None) -> _Writer:
        if v is None:
            return self.i16(-1)
        data = v.encode("utf-8")
        if len(data) > _MAX_STRING:
            raise RecordFormatError(f"string of {len(data)} bytes is too long for the record schema")
        self.i16(len(data))
        self.buf += data
        return self

    def bytes_(self, v: bytes | None) -> _Writer:
        if v is None:
            return self.i32(-1)
        self.i32(len(v))
        self.buf += v
        return self


def encodable(text: str | None) -> bool:
    """Whether ``text`` fits a schema string (int16 length)."""
    return text is None or len(text.encode("utf-8")) <= _MAX_STRING


def offset_key(group: str, topic: str, partition: int) -> bytes:
    return bytes(_Writer().i16(1).string(group).string(topic).i32(partition).buf)


def group_key(group: str) -> bytes:
    return bytes(_Writer().i16(GROUP_KEY_VERSION).string(group).buf)


def offset_value(c: CommittedOffset) -> bytes:
    w = _Writer()
    if c.expire_timestamp >= 0:
        w.i16(1).i64(c.offset).string(c.metadata).i64(c.commit_timestamp).i64(c.expire_timestamp)
    else:
        w.i16(3).i64(c.offset).i32(c.leader_epoch).string(c.metadata).i64(c.commit_timestamp)
    return bytes(w.buf)


def group_value(g: StoredGroup) -> bytes:
    w = _Writer().i16(3).string(g.protocol_type).i32(g.generation).string(g.protocol).string(g.leader)
    w.i64(g.state_timestamp).i32(len(g.members))
    for m in g.members:
        w.string(m.member_id).string(m.group_instance_id).string(m.client_id).string(m.client_host)
        w.i32(m.rebalance_timeout_ms).i32(m.session_timeout_ms).bytes_(m.subscription).bytes_(m.assignment)
    return bytes(w.buf)


# --------------------------------------------------------------------------- decoding


class _Reader:
    def __init__(self, data: bytes) -> None:
        self.data = data
        self.pos = 0

    def _take(self, n: int) -> bytes:
        if n < 0 or self.pos + n > len(self.data):
            raise RecordFormatError("record ends early")
        out = self.data[self.pos : self.pos + n]
        self.pos += n
        return out

    def i16(self) -> int:
        return int(_I16.unpack(self._take(2))[0])

    def i32(self) -> int:
        return int(_I32.unpack(self._take(4))[0])

    def i64(self) -> int:
        return int(_I64.unpack(self._take(8))[0])

    def string(self) -> str | None:
        n = self.i16()
        if n == -1:
            return None
        try:
            return self._take(n).decode("utf-8")
        except UnicodeDecodeError as exc:
            raise RecordFormatError("string is not UTF-8") from exc

    def required_string(self) -> str:
        s = self.string()
        if s is None:
            raise RecordFormatError("null where a string is required")
        return s

    def bytes_(self) -> bytes:
        n = self.i32()
        return b"" if n == -1 else self._take(n)


def parse_key(data: bytes) -> OffsetKey | GroupKey:
    r = _Reader(data)
    version = r.i16()
    if version in OFFSET_KEY_VERSIONS:
        return OffsetKey(r.required_string(), r.required_string(), r.i32())
    if version == GROUP_KEY_VERSION:
        return GroupKey(r.required_string())
    raise RecordFormatError(f"unknown key version {version}")


def parse_offset_value(data: bytes) -> CommittedOffset:
    r = _Reader(data)
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
    r = _Reader(data)
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
