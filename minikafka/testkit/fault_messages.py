"""How a fault rule reads the topics of a request and writes an error into a response.

Requests and responses are kafka-python message objects. Almost every Kafka API that names
partitions has the same shape: a top-level array of topic entries (a ``name`` or ``topic``
field), each holding an array of partition entries (an ``index``, ``partition_index`` or
``partition`` field), and errors live in ``error_code`` fields at the level they concern. The
helpers here rely on that shape instead of a table per API, so a fault rule works for every
API minikafka serves and for those added later. Entries that name their topic by id only (Fetch
v13+) are read by the name the broker knows for that id (``names``).
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import Any, TypeVar

_TOPIC_FIELDS = ("name", "topic")
_PARTITION_FIELDS = ("index", "partition_index", "partition")
#: arrays of plain partition numbers inside a topic entry (DescribeProducers; AddPartitionsToTxn
#: calls its plain array "partitions", a name other APIs give to arrays of partition entries)
_PARTITION_NUMBER_ARRAYS = ("partition_indexes", "partitions")
#: the fields an entry carries its error in (AddPartitionsToTxn says "partition_error_code")
_ERROR_FIELDS = ("error_code", "partition_error_code")
#: arrays of plain topic names at the top level (DeleteTopics before v6)
_TOPIC_NAME_ARRAYS = ("topic_names",)
#: top-level arrays that name topics without acting on them
_IGNORED_ARRAYS = frozenset({"forgotten_topics_data"})
#: fields an error answer carries as "no value", Kafka's convention
_NO_VALUE: dict[str, Any] = {
    "base_offset": -1,
    "log_append_time_ms": -1,
    "high_watermark": -1,
    "last_stable_offset": -1,
    "offset": -1,
    "timestamp": -1,
    "producer_id": -1,
    "producer_epoch": -1,
    "records": None,
}

#: matches (topic, partition-or-None) pairs; partition is None for a topic-level entry
Selector = Callable[[str, int | None], bool]
#: topic id -> topic name, for entries that carry only an id
TopicNames = Mapping[uuid.UUID, str]
K = TypeVar("K", str, int)


def _fields(obj: Any) -> dict[str, Any]:
    struct = getattr(obj, "_struct", None)
    return struct.fields if struct is not None else {}


def _struct_arrays(obj: Any) -> Iterator[tuple[str, Any]]:
    for name, field in _fields(obj).items():
        if field.is_struct_array():
            yield name, field


def _first_field(entry: Any, names: tuple[str, ...], kind: type) -> Any:
    """The value of the first of ``names`` that ``entry`` has and that is a ``kind``, else None."""
    fields = _fields(entry)
    for name in names:
        if name in fields:
            value = getattr(entry, name)
            if isinstance(value, kind):
                return value
    return None


def _topic_name(entry: Any, names: TopicNames | None = None) -> str | None:
    name = _first_field(entry, _TOPIC_FIELDS, str)
    topic_id = getattr(entry, "topic_id", None) if "topic_id" in _fields(entry) else None
    if not name and isinstance(topic_id, uuid.UUID) and names is not None:
        return names.get(topic_id)  # named by id: an unknown id names no topic
    return name


def _partition_number(entry: Any) -> int | None:
    return _first_field(entry, _PARTITION_FIELDS, int)


def _item_has(field: Any, names: tuple[str, ...]) -> bool:
    return field.has_data_class() and any(n in field.data_class._struct.fields for n in names)


def _topic_arrays(message: Any) -> Iterator[str]:
    """Names of the top-level fields that hold topic entries (or plain topic names)."""
    for name, field in _fields(message).items():
        if name in _IGNORED_ARRAYS or not field.is_array():
            continue
        if name in _TOPIC_NAME_ARRAYS or (field.is_struct_array() and _item_has(field, _TOPIC_FIELDS)):
            yield name


def _is_number_array(field: Any, name: str) -> bool:
    return name in _PARTITION_NUMBER_ARRAYS and field.is_array() and not field.is_struct_array()


def _partition_arrays(topic_entry: Any) -> Iterator[str]:
    for name, field in _fields(topic_entry).items():
        if _is_number_array(field, name) or (field.is_struct_array() and _item_has(field, _PARTITION_FIELDS)):
            yield name


def _partitions_of(topic_entry: Any, array: str) -> list[int]:
    items = getattr(topic_entry, array) or []
    if _is_number_array(_fields(topic_entry)[array], array):
        return [p for p in items if isinstance(p, int)]
    return [p for p in (_partition_number(item) for item in items) if p is not None]


def targets(request: Any, names: TopicNames | None = None) -> list[tuple[str, int | None]]:
    """(topic, partition) pairs a request acts on; partition None for a topic-only entry."""
    out: list[tuple[str, int | None]] = []
    for array in _topic_arrays(request):
        for entry in getattr(request, array) or []:
            topic = entry if isinstance(entry, str) else _topic_name(entry, names)
            if topic is None:
                continue
            partitions: list[int] = []
            if not isinstance(entry, str):
                for parray in _partition_arrays(entry):
                    partitions.extend(_partitions_of(entry, parray))
            if partitions:
                out.extend((topic, p) for p in partitions)
            else:
                out.append((topic, None))
    return out


def set_error(entry: Any, code: int, message: str | None) -> bool:
    """Put an error into one entry that has an error code field; False if it has none."""
    fields = _fields(entry)
    error_field = next((name for name in _ERROR_FIELDS if name in fields), None)
    if error_field is None:
        return False
    setattr(entry, error_field, int(code))
    if "error_message" in fields:
        entry.error_message = message
    for name, value in _NO_VALUE.items():
        if name in fields:
            setattr(entry, name, value)
    return True


def rewrite_errors(response: Any, selected: Selector | None, code: int, message: str | None,
                   names: TopicNames | None = None) -> int:
    """Set the error in the selected entries of a response; returns how many were set.

    ``selected`` None means the whole response: the top-level error and every topic and
    partition entry. Otherwise only the topic entries it selects (with partition None), and
    the partition entries it selects.
    """
    count = 0
    if selected is None and set_error(response, code, message):
        count += 1
    if selected is None:  # per-group answers (ConsumerGroupDescribe): every group gets the error
        for name, _field in _struct_arrays(response):
            for item in getattr(response, name) or ():
                if "group_id" in _fields(item) and set_error(item, code, message):
                    count += 1
    for topic, entry in _named_entries(response, _topic_arrays(response), lambda e: _topic_name(e, names)):
        if (selected is None or selected(topic, None)) and set_error(entry, code, message):
            count += 1
        for partition, item in _named_entries(entry, _partition_arrays(entry), _partition_number):
            if (selected is None or selected(topic, partition)) and set_error(item, code, message):
                count += 1
    return count


def _named_entries(message: Any, arrays: Iterable[str], name_of: Callable[[Any], K | None]
                   ) -> Iterator[tuple[K, Any]]:
    """The entries of ``message``'s ``arrays`` with their topic name or partition number
    (``name_of``); entries without one are left out."""
    for array in arrays:
        for entry in getattr(message, array) or []:
            name = name_of(entry)
            if name is not None:
                yield name, entry


class SplitRequest:
    """A request with the selected topics/partitions taken out, to be answered with an error.

    :meth:`remove` edits the request in place (the handler then sees only what is left);
    :meth:`merge` puts error entries for the removed parts into the handler's response, in the
    request's original order, so clients that pair answers by position still find theirs.
    """

    def __init__(self, request: Any, selected: Selector) -> None:
        self.request = request
        self.selected = selected
        #: per top-level array: the original entries, in order, as (topic, [partitions] or None)
        self._order: dict[str, list[tuple[str, list[int] | None]]] = {}
        #: removed (topic, partition-or-None) pairs
        self.removed: list[tuple[str, int | None]] = []
        self.kept_any = False

    def remove(self) -> None:
        for array in _topic_arrays(self.request):
            kept_entries = []
            order: list[tuple[str, list[int] | None]] = []
            for entry in getattr(self.request, array) or []:
                topic: str | None
                if isinstance(entry, str):  # a plain topic name
                    topic, parrays, partitions = entry, [], []
                else:
                    topic = _topic_name(entry)
                    parrays = list(_partition_arrays(entry))
                    partitions = [p for parray in parrays for p in _partitions_of(entry, parray)]
                if topic is None:
                    kept_entries.append(entry)
                    continue
                if not partitions:
                    order.append((topic, None))
                    if self.selected(topic, None):
                        self.removed.append((topic, None))
                    else:
                        kept_entries.append(entry)
                    continue
                order.append((topic, partitions))
                any_left = False
                for parray in parrays:
                    items = getattr(entry, parray) or []
                    left = []
                    for item in items:
                        p = item if isinstance(item, int) else _partition_number(item)
                        if p is not None and self.selected(topic, p):
                            self.removed.append((topic, p))
                        else:
                            left.append(item)
                    setattr(entry, parray, left)
                    any_left = any_left or bool(left)
                if any_left:
                    kept_entries.append(entry)
            setattr(self.request, array, kept_entries)
            self._order[array] = order
            self.kept_any = self.kept_any or bool(kept_entries)

    def merge(self, response: Any, code: int, message: str | None) -> None:
        """Add error entries for the removed parts to ``response`` (in request order)."""
        removed = set(self.removed)
        version = getattr(response, "version", None)
        arrays = list(_topic_arrays(response))
        if not arrays:
            set_error(response, code, message)
            return
        array = arrays[0]
        field = _fields(response)[array]
        if not field.is_struct_array():
            return
        topic_cls = field.data_class
        by_topic: dict[str, Any] = {}
        for entry in getattr(response, array) or []:
            name = _topic_name(entry)
            if name is not None:
                by_topic.setdefault(name, entry)
        order = [item for entries in self._order.values() for item in entries]
        out = []
        for topic, partitions in order:
            entry = by_topic.pop(topic, None)
            if partitions is None:
                if (topic, None) in removed:
                    entry = _new_entry(topic_cls, version)
                    _set_first_field(entry, _TOPIC_FIELDS, topic)
                    set_error(entry, code, message)
                if entry is not None:
                    out.append(entry)
                continue
            wanted = [p for p in partitions if (topic, p) in removed]
            if not wanted and entry is not None:
                out.append(entry)
                continue
            if entry is None:
                entry = _new_entry(topic_cls, version)
                _set_first_field(entry, _TOPIC_FIELDS, topic)
            parrays = [a for a in _partition_arrays(entry) if not _is_number_array(_fields(entry)[a], a)]
            if not parrays:
                set_error(entry, code, message)
                out.append(entry)
                continue
            parray = parrays[0]
            part_cls = _fields(entry)[parray].data_class
            have = {_partition_number(item): item for item in getattr(entry, parray) or []}
            merged = []
            for p in partitions:
                if (topic, p) in removed:
                    item = _new_entry(part_cls, version)
                    _set_first_field(item, _PARTITION_FIELDS, p)
                    set_error(item, code, message)
                    merged.append(item)
                elif p in have:
                    merged.append(have.pop(p))
            merged.extend(have.values())
            setattr(entry, parray, merged)
            out.append(entry)
        out.extend(by_topic.values())
        setattr(response, array, out)


def _new_entry(cls: Any, version: int | None) -> Any:
    try:
        return cls(version=version) if version is not None else cls()
    except ValueError:  # the nested schema's version range differs
        return cls()


def _set_first_field(entry: Any, names: tuple[str, ...], value: Any) -> None:
    """Set the first of ``names`` that ``entry`` has (the counterpart of :func:`_first_field`)."""
    fields = _fields(entry)
    for name in names:
        if name in fields:
            setattr(entry, name, value)
            return
