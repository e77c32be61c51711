"""Kafka's topic-name rules as the broker applies them to requests.

Legality and the internal-topic rule are on-disk format rules shared with the Spark reader
(:mod:`minikafka.storage.disk_format`); the collision rule is the broker's alone.
"""

from __future__ import annotations

from minikafka.storage.disk_format import INTERNAL_TOPICS, topic_name_error
from minikafka.storage.disk_format import is_internal_topic as is_internal

__all__ = ["INTERNAL_TOPICS", "collides", "is_internal", "topic_name_error"]


def collides(name: str, existing: object) -> str | None:
    """An existing topic that equals ``name`` once '.' and '_' are treated alike."""
    if "." not in name and "_" not in name:
        return None
    key = name.replace(".", "_")
    for other in existing:  # type: ignore[attr-defined]
        if other != name and other.replace(".", "_") == key:
            return str(other)
    return None
