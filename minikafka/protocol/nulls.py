"""Refuse requests that carry a null where the API's schema does not allow one.

The codec reads a length of -1 as null for any string, bytes or array field, nullable or not.
Kafka's parser instead rejects a null in a non-nullable field, which makes the broker close the
connection (an invalid request). Without this check, such a request would reach a handler that
rightly assumes, say, a topic's partition list is a list.
"""

from __future__ import annotations

from typing import Any

#: Field types that decode to a value even from hostile bytes (never None).
_NEVER_NULL = frozenset({"bool", "int8", "int16", "uint16", "int32", "uint32", "int64", "float64", "uuid"})

#: (id of a struct field, version) -> [(attribute, nullable, child struct or None, is array, element type)]
_PLANS: dict[tuple[int, int], list[tuple[str, bool, Any, bool, str]]] = {}


class NullInRequest(ValueError):
    """A non-nullable field of the request is null."""


def _plan(struct: Any, version: int) -> list[tuple[str, bool, Any, bool, str]]:
    key = (id(struct), version)
    plan = _PLANS.get(key)
    if plan is None:
        plan = []
        for field in struct.untagged_fields(version):
            type_str = str(field.type_str)
            if field.is_struct_array():
                plan.append((field.name, field.nullable_for_version_q(version), field.array_of, True, ""))
            elif field.is_struct():
                plan.append((field.name, field.nullable_for_version_q(version), field, False, ""))
            elif field.is_array():
                plan.append((field.name, field.nullable_for_version_q(version), None, True, type_str.lstrip("[]")))
            elif type_str not in _NEVER_NULL:
                plan.append((field.name, field.nullable_for_version_q(version), None, False, type_str))
        _PLANS[key] = plan
    return plan


def _check(struct: Any, item: Any, version: int, path: str) -> None:
    for name, nullable, child, is_array, element_type in _plan(struct, version):
        value = getattr(item, name, None)
        if value is None:
            if not nullable:
                raise NullInRequest(f"non-nullable field {path}{name} is null")
            continue
        if child is not None:
            for element in value if is_array else (value,):
                _check(child, element, version, f"{path}{name}.")
        elif is_array and element_type not in _NEVER_NULL and any(element is None for element in value):
            raise NullInRequest(f"non-nullable element of {path}{name} is null")


def check_request_nulls(request_class: Any, request: Any, version: int) -> None:
    """Raise :class:`NullInRequest` when ``request`` has a null its schema forbids."""
    struct = getattr(request_class, "_struct", None)  # the codec's schema for this API
    if struct is None:
        return
    _check(struct, request, version, "")
