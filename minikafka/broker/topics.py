"""Kafka's topic-name rules (reference §7.1)."""

from __future__ import annotations

import re

MAX_NAME_LENGTH = 249
_LEGAL = re.compile(r"[a-zA-Z0-9._-]+")
INTERNAL_TOPICS = frozenset({"__consumer_offsets", "__transaction_state", "__share_group_state"})


def topic_name_error(name: str | None) -> str | None:
    """Why ``name`` is not a legal topic name, or None when it is."""
    if not name:
        return "topic name is empty"
    if name in (".", ".."):
        return f"topic name cannot be {name!r}"
    if len(name) > MAX_NAME_LENGTH:
        return f"topic name is longer than {MAX_NAME_LENGTH} characters"
    if not _LEGAL.fullmatch(name):
        return "topic name may only contain ASCII letters, digits, '.', '_' and '-'"
    return None


def is_internal(name: str) -> bool:
    return name in INTERNAL_TOPICS


def collides(name: str, existing: object) -> str | None:
    """An existing topic that equals ``name`` once '.' and '_' are treated alike."""
    if "." not in name and "_" not in name:
        return None
    key = name.replace(".", "_")
    for other in existing:  # type: ignore[attr-defined]
        if other != name and other.replace(".", "_") == key:
            return str(other)
    return None
