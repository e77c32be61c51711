"""The codec of the per-request path: kafka-python's classes, with hand-written fast paths for
the hottest messages at the versions they are tested for.

Every request and response goes through :func:`decode_request` and :func:`encode_response`.
For most APIs and versions these are kafka-python's own decode/encode (plus the null check of
:mod:`minikafka.protocol.nulls`). The fast paths read into and write from the very same
kafka-python objects, so handlers and the fault injector see no difference; they exist because
kafka-python's generic machinery (buffer pools, per-struct tagged-field encoders, version
look-ups) costs more than the few fields of a small Produce. Property tests
(tests/protocol/test_fast_codec.py) check each one against kafka-python for every version in its table.
Anything a fast path does not handle (a tagged field, a value of an unexpected type or out of
range) makes it step aside for kafka-python, which then decides.

A Fetch answer is written as parts: the record bytes read from the log are handed to the socket
as they are, not copied into an encode buffer and out again.
"""

from __future__ import annotations

import struct
from typing import Any

from minikafka.protocol.apis import ApiCodec, ApiKey
from minikafka.protocol.nulls import NullInRequest, check_request_nulls

_HEAD = struct.Struct(">ii")
_HEAD_FLEXIBLE = struct.Struct(">iib")
_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")
_I64 = struct.Struct(">q")
_ACKS_TIMEOUT = struct.Struct(">hi")
_PRODUCED = struct.Struct(">ihqq")  # index, error code, base offset, log append time
_PRODUCED_START = struct.Struct(">ihqqq")  # the same and log start offset (v5+)
#: v8+ partition answer without record errors or message: an empty array and a null string
_NO_RECORD_ERRORS = _I32.pack(0) + _I16.pack(-1)
_NO_RECORD_ERRORS_FLEXIBLE = bytes([1, 0])
_FETCHED = struct.Struct(">ihqq")  # partition, error code, high watermark, last stable offset
_ABORTED = struct.Struct(">qq")
_FETCH_TOP = struct.Struct(">ihi")  # throttle time, error code, session id (v7+)

#: versions each fast path is property-tested for (tests/protocol/test_fast_codec.py); others use kafka-python
PRODUCE_REQUEST_VERSIONS = range(3, 13)
PRODUCE_RESPONSE_VERSIONS = range(3, 13)
FETCH_RESPONSE_VERSIONS = range(4, 18)
PRODUCE_FLEXIBLE = 9
#: Records at least this large are handed over as a view of the request's bytes when those are
#: writable: a frame that large has a buffer of its own (FrameReader), so the batch can be checked
#: and appended in place, without a copy.
SHARED_RECORDS = 64 * 1024
FETCH_FLEXIBLE = 12
FETCH_TOPIC_IDS = 13  # v13+: each topic by its id (16 bytes), no name
#: the keys with fast paths, as module constants: cheaper per request than the enum's attributes
_PRODUCE = ApiKey.PRODUCE
_FETCH = ApiKey.FETCH

Parts = list[bytes | bytearray | memoryview]


class _StepAside(Exception):
    """The message has something the fast path does not handle: kafka-python takes it."""


def frame_head(body_size: int, correlation_id: int, flexible: bool) -> bytes:
    """Size prefix and response header (v1 when ``flexible``: an empty tagged-field section)."""
    if flexible:
        return _HEAD_FLEXIBLE.pack(body_size + 5, correlation_id, 0)
    return _HEAD.pack(body_size + 4, correlation_id)


def decode_request(spec: ApiCodec, version: int, body: memoryview) -> Any:
    """The request object for ``body`` (the bytes after the request header)."""
    if spec.key == _PRODUCE and version in PRODUCE_REQUEST_VERSIONS:
        try:
            return decode_produce_request(spec.request, body, version)
        except _StepAside:
            pass
    request = spec.request.decode(body, version=version)
    check_request_nulls(spec.request, request, version)  # Kafka's parser refuses these
    return request


def encode_response(api_key: int, version: int, response: Any) -> Parts | None:
    """The body of ``response`` as parts to write in order, or None: kafka-python encodes it."""
    try:
        if api_key == _PRODUCE and version in PRODUCE_RESPONSE_VERSIONS:
            return [encode_produce_response(response, version)]
        if api_key == _FETCH and version in FETCH_RESPONSE_VERSIONS:
            return encode_fetch_response(response, version)
    except (_StepAside, struct.error, AttributeError, TypeError, ValueError, OverflowError):
        pass  # kafka-python encodes it, or raises the error it raises
    return None


# ----------------------------------------------------------------------------- reading


# Garbage is read exactly as kafka-python's decoder reads it (a negative array length other than
# -1 is an empty array, a length past the end takes what is there), so that a request is refused
# or served the same whichever decoder reads it.


def _length(body: memoryview, pos: int, flexible: bool, wide: bool) -> tuple[int, int]:
    """A string/bytes/array length: compact (unsigned varint, +1) or int16/int32; -1 is null."""
    if flexible:
        n = body[pos]
        if n < 0x80:  # the usual one-byte varint
            return n - 1, pos + 1
        n = shift = 0
        while True:
            byte = body[pos]
            pos += 1
            n |= (byte & 0x7F) << shift
            if not byte & 0x80:
                return n - 1, pos
            shift += 7
    if wide:
        return _I32.unpack_from(body, pos)[0], pos + 4
    return _I16.unpack_from(body, pos)[0], pos + 2


def _string(body: memoryview, pos: int, flexible: bool, field: str, nullable: bool) -> tuple[str | None, int]:
    if flexible and body[pos] < 0x80:  # the usual one-byte length, read here
        end = pos + body[pos]
        if end > pos:
            return str(body[pos + 1 : end], "utf-8"), end
        if nullable:
            return None, pos + 1
    n, pos = _length(body, pos, flexible, False)
    if n < 0:
        if not nullable:
            raise NullInRequest(f"non-nullable field {field} is null")
        return None, pos
    return str(body[pos : pos + n], "utf-8"), pos + n


def _count(body: memoryview, pos: int, flexible: bool, field: str) -> tuple[int, int]:
    if flexible and 0 < body[pos] < 0x80:  # the usual one-byte length, read here
        return body[pos] - 1, pos + 1
    n, pos = _length(body, pos, flexible, True)
    if n == -1:
        raise NullInRequest(f"non-nullable field {field} is null")
    return max(n, 0), pos


def _no_tags(body: memoryview, pos: int) -> int:
    if body[pos] != 0:
        raise _StepAside("tagged fields")
    return pos + 1


#: class given to make -> (class of the object, its version, names of its tagged fields)
_MAKE_PLANS: dict[Any, tuple[Any, int | None, frozenset[str]]] = {}


def make(cls: Any, **fields: Any) -> Any:
    """``cls(**fields)`` for a kafka-python message or struct class, without its generic
    constructor's walk over every field of the schema.

    A versioned message class (``ProduceResponse[9]``) gives an object of that version; a struct
    class an object without one, as its constructor does. Fields not given read as the schema's
    default, as with the constructor."""
    plan = _MAKE_PLANS.get(cls)
    if plan is None:
        version = getattr(cls, "_class_version", None)
        data_class = cls if version is None else cls[None]
        tagged = frozenset(f.name for f in data_class._struct._fields if f._tag is not None)
        plan = _MAKE_PLANS[cls] = (data_class, version, tagged)
    data_class, version, tagged = plan
    obj = object.__new__(data_class)
    obj._version = version
    obj.unknown_tags = None
    if version is not None:
        obj._header = obj._min_version = obj._max_version = None
    obj.tags = None if tagged.isdisjoint(fields) else set(tagged.intersection(fields))
    for name, value in fields.items():
        setattr(obj, name, value)
    return obj


#: version -> (message class, topic class, partition class, record error class)
_PRODUCE_RESPONSE_CLASSES: dict[int, tuple[Any, Any, Any, Any]] = {}


def _produce_response_classes(version: int) -> tuple[Any, Any, Any, Any]:
    from kafka.protocol.producer import ProduceResponse

    topic_class = ProduceResponse[version].TopicProduceResponse
    partition_class = topic_class.PartitionProduceResponse
    classes = (ProduceResponse, topic_class, partition_class, partition_class.BatchIndexAndErrorMessage)
    _PRODUCE_RESPONSE_CLASSES[version] = classes
    return classes


def produce_partition_response(version: int, index: int, error_code: int, base_offset: int,
                               log_append_time_ms: int, log_start_offset: int, error_message: str | None,
                               record_errors: list[tuple[int, str | None]]) -> Any:
    """One partition's answer in a ProduceResponse of ``version``, as :func:`make` builds it
    (``error_message`` and ``record_errors`` are set from v8, where they exist), filled slot by
    slot: this runs for every partition of every Produce."""
    classes = _PRODUCE_RESPONSE_CLASSES.get(version) or _produce_response_classes(version)
    p = object.__new__(classes[2])
    p._version = p.tags = p.unknown_tags = None
    p.index = index
    p.error_code = error_code
    p.base_offset = base_offset
    p.log_append_time_ms = log_append_time_ms
    p.log_start_offset = log_start_offset
    if version >= 8:
        p.error_message = error_message
        p.record_errors = [make(classes[3], batch_index=i, batch_index_error_message=m) for i, m in record_errors]
    return p


def produce_response(version: int, topics: list[tuple[str, list[Any]]]) -> Any:
    """ProduceResponse[version] of ``(topic name, partition answers)`` pairs, throttle time 0,
    as :func:`make` builds it."""
    message_class, topic_class, _, _ = _PRODUCE_RESPONSE_CLASSES.get(version) or _produce_response_classes(version)
    answers = []
    for name, partitions in topics:
        t = object.__new__(topic_class)
        t._version = t.tags = t.unknown_tags = None
        t.name = name
        t.partition_responses = partitions
        answers.append(t)
    r = object.__new__(message_class)
    r._version = version
    r.tags = r.unknown_tags = r._header = r._min_version = r._max_version = None
    r.responses = answers
    r.throttle_time_ms = 0
    return r


#: (request class, version) -> (message class, topic class, partition class, flexible)
_PRODUCE_REQUEST_PLANS: dict[tuple[Any, int], tuple[Any, Any, Any, bool]] = {}


def _produce_request_plan(request_class: Any, version: int) -> tuple[Any, Any, Any, bool]:
    topic_class = request_class.TopicProduceData
    plan = (request_class[None], topic_class, topic_class.PartitionProduceData, version >= PRODUCE_FLEXIBLE)
    _PRODUCE_REQUEST_PLANS[request_class, version] = plan
    return plan


def _blank(cls: Any, version: int) -> Any:
    """An object of a kafka-python struct class without fields, as its decoder starts one."""
    obj = object.__new__(cls)
    obj._version = version
    obj.tags = obj.unknown_tags = None
    return obj


def decode_produce_request(request_class: Any, body: memoryview, version: int) -> Any:
    """ProduceRequest v3+ into kafka-python's objects, refusing nulls where Kafka does.

    Written out for speed (this runs for every Produce): objects are filled slot by slot, and a
    compact length under 128 (one byte) is read in place."""
    plan = _PRODUCE_REQUEST_PLANS.get((request_class, version)) or _produce_request_plan(request_class, version)
    message_class, topic_class, partition_class, flexible = plan
    transactional_id, pos = _string(body, 0, flexible, "transactional_id", True)
    acks, timeout_ms = _ACKS_TIMEOUT.unpack_from(body, pos)
    pos += 6
    topic_count, pos = _count(body, pos, flexible, "topic_data")
    topics = []
    for _ in range(topic_count):
        name, pos = _string(body, pos, flexible, "topic_data.name", False)
        partition_count, pos = _count(body, pos, flexible, "topic_data.partition_data")
        partitions = []
        for _ in range(partition_count):
            (index,) = _I32.unpack_from(body, pos)
            pos += 4
            if flexible and body[pos] < 0x80:
                size = body[pos] - 1
                pos += 1
            elif flexible and body[pos + 1] < 0x80:  # two bytes: records of 127 B to 16 KiB
                size = (body[pos] & 0x7F | body[pos + 1] << 7) - 1
                pos += 2
            else:
                size, pos = _length(body, pos, flexible, True)
            records: bytes | memoryview | None
            if size < 0:
                records = None
            elif size >= SHARED_RECORDS and not body.readonly:
                records = body[pos : pos + size]
                pos += size
            else:
                records = bytes(body[pos : pos + size])
                pos += size
            if flexible:
                if body[pos]:
                    raise _StepAside("tagged fields")
                pos += 1
            partition = _blank(partition_class, version)
            partition.index = index
            partition.records = records
            partitions.append(partition)
        if flexible:
            pos = _no_tags(body, pos)
        topic = _blank(topic_class, version)
        topic.name = name
        topic.partition_data = partitions
        topics.append(topic)
    if flexible:
        _no_tags(body, pos)
    request = object.__new__(message_class)
    request._version = version
    request.tags = request.unknown_tags = request._header = request._min_version = request._max_version = None
    request.transactional_id = transactional_id
    request.acks = acks
    request.timeout_ms = timeout_ms
    request.topic_data = topics
    return request


# ----------------------------------------------------------------------------- writing


def _plain(obj: Any) -> None:
    """Step aside for objects carrying tagged fields (known or unknown)."""
    if obj.tags or obj.unknown_tags:
        raise _StepAside("tagged fields")


def _put_length(out: bytearray, n: int, flexible: bool, wide: bool) -> None:
    if flexible:
        n += 1
        while n >= 0x80:
            out.append((n & 0x7F) | 0x80)
            n >>= 7
        out.append(n)
    elif wide:
        out += _I32.pack(n)
    else:
        out += _I16.pack(n)


def _put_string(out: bytearray, value: str | None, flexible: bool, nullable: bool) -> None:
    if value is None:
        if not nullable:
            raise _StepAside("null in a non-nullable string")
        _put_length(out, -1, flexible, False)
        return
    data = value.encode("utf-8")
    _put_length(out, len(data), flexible, False)
    out += data


def _put_topics(out: bytearray, topics: list[Any], flexible: bool) -> list[Any]:
    """The topic count of a Produce or Fetch answer; returns ``topics``."""
    _put_length(out, len(topics), flexible, True)
    return topics


def _put_topic(out: bytearray, topic: Any, name: str, partitions: list[Any], flexible: bool) -> list[Any]:
    """A topic's name and partition count, the start of each topic in Produce and Fetch answers;
    returns ``partitions``."""
    _plain(topic)
    _put_string(out, name, flexible, False)
    _put_length(out, len(partitions), flexible, True)
    return partitions


def encode_produce_response(response: Any, version: int) -> bytearray:
    flexible = version >= PRODUCE_FLEXIBLE
    no_record_errors = _NO_RECORD_ERRORS_FLEXIBLE if flexible else _NO_RECORD_ERRORS
    out = bytearray()
    _plain(response)
    for topic in _put_topics(out, response.responses, flexible):
        for p in _put_topic(out, topic, topic.name, topic.partition_responses, flexible):
            if p.tags or p.unknown_tags:
                raise _StepAside("tagged fields")
            if version >= 5:
                out += _PRODUCED_START.pack(p.index, p.error_code, p.base_offset, p.log_append_time_ms,
                                            p.log_start_offset)
            else:
                out += _PRODUCED.pack(p.index, p.error_code, p.base_offset, p.log_append_time_ms)
            if version >= 8:
                errors = p.record_errors
                if errors == [] and p.error_message is None:  # the usual answer: written in one piece
                    out += no_record_errors
                else:
                    _put_length(out, len(errors), flexible, True)
                    for e in errors:
                        _plain(e)
                        out += _I32.pack(e.batch_index)
                        _put_string(out, e.batch_index_error_message, flexible, True)
                        if flexible:
                            out.append(0)
                    _put_string(out, p.error_message, flexible, True)
            if flexible:
                out.append(0)
        if flexible:
            out.append(0)
    out += _I32.pack(response.throttle_time_ms)
    if flexible:
        out.append(0)
    return out


def encode_fetch_response(response: Any, version: int) -> Parts:
    """FetchResponse v4+; each partition's records go out as they are, without a copy. Tagged
    fields (a follower's diverging epoch, KIP-951's leader hints) step aside for kafka-python."""
    flexible = version >= FETCH_FLEXIBLE
    parts: Parts = []
    out = bytearray()
    _plain(response)
    if version >= 7:
        out += _FETCH_TOP.pack(response.throttle_time_ms, response.error_code, response.session_id)
    else:
        out += _I32.pack(response.throttle_time_ms)
    by_id = version >= FETCH_TOPIC_IDS
    for topic in _put_topics(out, response.responses, flexible):
        if by_id:
            _plain(topic)
            out += topic.topic_id.bytes
            _put_length(out, len(topic.partitions), flexible, True)
            partitions = topic.partitions
        else:
            partitions = _put_topic(out, topic, topic.topic, topic.partitions, flexible)
        for p in partitions:
            _plain(p)
            out += _FETCHED.pack(p.partition_index, p.error_code, p.high_watermark, p.last_stable_offset)
            if version >= 5:
                out += _I64.pack(p.log_start_offset)
            aborted = p.aborted_transactions
            if aborted is None:
                _put_length(out, -1, flexible, True)
            else:
                _put_length(out, len(aborted), flexible, True)
                for a in aborted:
                    _plain(a)
                    out += _ABORTED.pack(a.producer_id, a.first_offset)
                    if flexible:
                        out.append(0)
            if version >= 11:
                out += _I32.pack(p.preferred_read_replica)
            records = p.records
            if records is None:
                _put_length(out, -1, flexible, True)
            elif isinstance(records, (bytes, bytearray, memoryview)):
                _put_length(out, len(records), flexible, True)
                if len(records) < 4096:
                    out += records
                else:
                    parts.append(out)
                    parts.append(records)
                    out = bytearray()
            else:
                raise _StepAside("records that are not bytes")
            if flexible:
                out.append(0)
        if flexible:
            out.append(0)
    if flexible:
        out.append(0)
    parts.append(out)
    return parts
