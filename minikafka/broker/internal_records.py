"""What the records of both coordinators' internal topics share, and what their write errors become.

``__consumer_offsets`` (:mod:`minikafka.broker.groups.records`) and ``__transaction_state``
(:mod:`minikafka.broker.transactions.records`) use Kafka's non-flexible encoding for their keys
and values: an int16 schema version first, int16-length UTF-8 strings, int32-length byte arrays,
big-endian integers. :class:`Writer` and :class:`Reader` are that encoding; a record that does
not follow it raises :class:`RecordFormatError`. Which partition of an internal topic a group or
transactional id belongs to is Kafka's :func:`partition_for`.

A failed append to an internal log becomes the answer Kafka's coordinators give
(:func:`append_error`): the client retries elsewhere or later, it never sees a storage error.
Kafka: ``GroupMetadataManager.storeGroup``'s error mapping and ``TransactionStateManager.appendTransactionToLog``.
"""

from __future__ import annotations

import struct
import uuid

from minikafka.errors import ErrorCode, KafkaError

#: The longest string an int16 length prefix allows.
MAX_STRING = 32767

_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")
_I64 = struct.Struct(">q")


class RecordFormatError(ValueError):
    """A key or value that does not follow its schema."""


class Writer:
    """Builds one key or value (the methods chain)."""

    def __init__(self) -> None:
        self.buf = bytearray()

    def i8(self, v: int) -> Writer:
        self.buf += v.to_bytes(1, "big", signed=True)
        return self

    def i16(self, v: int) -> Writer:
        self.buf += _I16.pack(v)
        return self

    def i32(self, v: int) -> Writer:
        self.buf += _I32.pack(v)
        return self

    def i64(self, v: int) -> Writer:
        self.buf += _I64.pack(v)
        return self

    def string(self, v: str | None) -> Writer:
        if v is None:
            return self.i16(-1)
        data = v.encode("utf-8")
        if len(data) > MAX_STRING:
            raise RecordFormatError(f"string of {len(data)} bytes is too long for the record schema")
        self.i16(len(data))
        self.buf += data
        return self

    def bytes_(self, v: bytes | None) -> Writer:
        if v is None:
            return self.i32(-1)
        self.i32(len(v))
        self.buf += v
        return self

    # Kafka's flexible encoding (the values of the KIP-848 group records): unsigned varints,
    # compact strings and arrays (length + 1, 0 = null), raw UUIDs, tagged-field sections.

    def uvarint(self, v: int) -> Writer:
        while v >= 0x80:
            self.buf.append((v & 0x7F) | 0x80)
            v >>= 7
        self.buf.append(v)
        return self

    def compact_string(self, v: str | None) -> Writer:
        if v is None:
            return self.uvarint(0)
        data = v.encode("utf-8")
        if len(data) > MAX_STRING:
            raise RecordFormatError(f"string of {len(data)} bytes is too long for the record schema")
        self.uvarint(len(data) + 1)
        self.buf += data
        return self

    def uuid(self, v: uuid.UUID) -> Writer:
        self.buf += v.bytes
        return self

    def no_tags(self) -> Writer:
        """An empty tagged-field section."""
        return self.uvarint(0)


class Reader:
    """Reads one key or value front to back; :class:`RecordFormatError` when it ends early."""

    def __init__(self, data: bytes) -> None:
        self.data = data
        self.pos = 0

    def take(self, n: int) -> bytes:
        if n < 0 or self.pos + n > len(self.data):
            raise RecordFormatError("record ends early")
        out = self.data[self.pos : self.pos + n]
        self.pos += n
        return out

    def i8(self) -> int:
        return int.from_bytes(self.take(1), "big", signed=True)

    def i16(self) -> int:
        return int(_I16.unpack(self.take(2))[0])

    def i32(self) -> int:
        return int(_I32.unpack(self.take(4))[0])

    def i64(self) -> int:
        return int(_I64.unpack(self.take(8))[0])

    def _text(self, n: int) -> str | None:
        """The next ``n`` bytes as UTF-8; None for the null length -1."""
        if n == -1:
            return None
        try:
            return self.take(n).decode("utf-8")
        except UnicodeDecodeError as exc:
            raise RecordFormatError("string is not UTF-8") from exc

    def string(self) -> str | None:
        return self._text(self.i16())

    def required_string(self) -> str:
        s = self.string()
        if s is None:
            raise RecordFormatError("null where a string is required")
        return s

    def bytes_(self) -> bytes:
        n = self.i32()
        return b"" if n == -1 else self.take(n)

    def uvarint(self) -> int:
        value = shift = 0
        while True:
            byte = self.take(1)[0]
            value |= (byte & 0x7F) << shift
            if not byte & 0x80:
                return value
            shift += 7
            if shift > 28:
                raise RecordFormatError("varint is too long")

    def compact_length(self) -> int:
        """The length of a compact string or array; -1 for null."""
        n = self.uvarint() - 1
        if n > len(self.data) - self.pos:
            raise RecordFormatError("record ends early")
        return n

    def compact_string(self) -> str | None:
        return self._text(self.compact_length())

    def required_compact_string(self) -> str:
        s = self.compact_string()
        if s is None:
            raise RecordFormatError("null where a string is required")
        return s

    def uuid(self) -> uuid.UUID:
        return uuid.UUID(bytes=self.take(16))

    def tags(self) -> dict[int, bytes]:
        """A tagged-field section: tag -> raw value."""
        out = {}
        for _ in range(self.uvarint()):
            tag = self.uvarint()
            out[tag] = self.take(self.uvarint())
        return out


def encodable(text: str | None) -> bool:
    """Whether ``text`` fits a schema string (int16 length)."""
    return text is None or len(text.encode("utf-8")) <= MAX_STRING


def java_string_hash(text: str) -> int:
    """Java's ``String.hashCode``: over UTF-16 code units, with int32 wrap-around."""
    h = 0
    data = text.encode("utf-16-be")
    for i in range(0, len(data), 2):
        h = (31 * h + ((data[i] << 8) | data[i + 1])) & 0xFFFFFFFF
    return h - (1 << 32) if h >= 1 << 31 else h


def partition_for(key: str, partitions: int) -> int:
    """Kafka's internal-topic partition of a group or transactional id:
    ``Utils.abs(hashCode) % partitions`` where ``Utils.abs(Integer.MIN_VALUE)`` is 0."""
    h = java_string_hash(key)
    return (0 if h == -(1 << 31) else abs(h)) % partitions


def append_error(exc: Exception) -> int:
    """What a failed append to an internal log becomes in a coordinator's answer (Kafka's mapping)."""
    code = exc.code if isinstance(exc, KafkaError) else ErrorCode.UNKNOWN_SERVER_ERROR
    if code in (ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, ErrorCode.NOT_ENOUGH_REPLICAS,
                ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND, ErrorCode.REQUEST_TIMED_OUT,
                ErrorCode.COORDINATOR_NOT_AVAILABLE):
        return ErrorCode.COORDINATOR_NOT_AVAILABLE
    if code in (ErrorCode.NOT_LEADER_OR_FOLLOWER, ErrorCode.KAFKA_STORAGE_ERROR):
        return ErrorCode.NOT_COORDINATOR
    return ErrorCode.UNKNOWN_SERVER_ERROR
