"""The regular expressions of KIP-848 consumer groups, resolved as Kafka resolves them: in the
background, per group, never on the heartbeat that brings them.

A member may subscribe to a regular expression (``SubscribedTopicRegex``) besides topic names. A
heartbeat that brings a regex new to its group only asks for a resolution: the group epoch is not
bumped, so the member is assigned its named topics at once and the regex's topics only after the
resolution finished. The resolution runs after the heartbeat has been answered; it writes one
ConsumerGroupRegularExpression record (type 16) per regex still in use and, when what some regex
matches changed, bumps the group epoch; the members get the new target on their next heartbeats.

A heartbeat of a group that uses regexes starts a resolution of all of them when none is pending
for the group, the last one finished more than 10 s ago, and: a regex in use is not resolved yet,
or a topic was created since the last resolution, or the last resolution is older than
``group.consumer.regex.refresh.interval.ms``. Deleting a topic does not start one: its name stays
in the resolution and drops out of the group's subscribed-topic metadata (see the coordinator).
Kafka's ``GroupMetadataManager.maybeUpdateRegularExpressions``, ``refreshRegularExpressions`` and
``handleRegularExpressionsResult``:
https://github.com/apache/kafka/blob/trunk/group-coordinator/src/main/java/org/apache/kafka/coordinator/group/GroupMetadataManager.java

Kafka's version of a resolution is the offset of the metadata image it read; minikafka has no
metadata log on one broker, so its version is a broker-clock time at which the coordinator noticed
a topic id it had not seen (the first look after a start counts every topic as new, so a topic
created just before a restart is not missed). Regexes match with Python's ``re.fullmatch`` (Kafka:
RE2/J, whole name); internal topics never match.
"""

from __future__ import annotations

import re
import uuid
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Protocol

from minikafka.broker.groups.consumer_group import ConsumerGroup
from minikafka.broker.groups.consumer_records import REGULAR_EXPRESSION, ConsumerRecord, ResolvedRegex
from minikafka.broker.topics import is_internal

#: Kafka's REGEX_BATCH_REFRESH_MIN_INTERVAL_MS: the least time between two resolutions of a group
MIN_REFRESH_INTERVAL_MS = 10_000


class HasTopicId(Protocol):
    @property
    def topic_id(self) -> uuid.UUID: ...


def invalid_regex(regex: str) -> str | None:
    """None when ``regex`` compiles; else why not (for INVALID_REGULAR_EXPRESSION)."""
    try:
        re.compile(regex)
    except re.error as exc:
        return str(exc)
    return None


def resolve(regexes: Iterable[str], names: Iterable[str], version: int, now: int) -> dict[str, ResolvedRegex]:
    """What each regex matches among ``names`` (whole names, internal topics left out)."""
    names = sorted(n for n in names if not is_internal(n))
    out = {}
    for regex in regexes:
        try:
            pattern = re.compile(regex)
        except re.error:
            continue  # refused when it was new to the group; cannot happen
        out[regex] = ResolvedRegex(tuple(n for n in names if pattern.fullmatch(n)), version, now)
    return out


@dataclass(frozen=True, slots=True)
class RegexUpdate:
    """What a heartbeat's change of regex means for its group."""

    #: tombstone of the regex the member was the last to use
    records: list[ConsumerRecord]
    #: the member switched to a regex the group has resolved already: bump the group epoch
    bump: bool
    #: the regexes to resolve in the background (None: no resolution starts)
    refresh: frozenset[str] | None


@dataclass(slots=True)
class RegexRefresh:
    """The coordinator-wide part: which groups have a resolution pending, and the metadata
    version (when a topic was last created)."""

    refresh_interval_ms: int
    pending: set[str] = field(default_factory=set)
    version: int = -1
    _seen: frozenset[uuid.UUID] | None = None

    def observe(self, topics: Mapping[str, HasTopicId], now: int) -> int:
        """Note the topics that exist now; the metadata version (a newer one when a topic was created)."""
        ids = frozenset(info.topic_id for info in topics.values())
        if self._seen is None or not ids <= self._seen:
            self.version = max(now, self.version + 1)
        self._seen = ids
        return self.version

    def on_heartbeat(self, group: ConsumerGroup, old_regex: str | None, new_regex: str | None,
                     topics: Mapping[str, HasTopicId], now: int) -> RegexUpdate:
        """Kafka's ``maybeUpdateRegularExpressions`` for a member whose regex goes from
        ``old_regex`` to ``new_regex`` (None or "" = none); ``new_regex`` was checked to compile."""
        records: list[ConsumerRecord] = []
        bump = require = False
        if old_regex != new_regex:
            if old_regex and group.regex_users(old_regex) == 1:
                records.append(ConsumerRecord(group.key(REGULAR_EXPRESSION, old_regex), None))
            if new_regex:
                if group.regex_users(new_regex) == 0:
                    require = True
                else:
                    bump = new_regex in group.regexes
        in_use = {m.subscription.regex for m in group.members.values() if m.subscription.regex}
        if not require and not in_use:
            return RegexUpdate(records, bump, None)
        version = self.observe(topics, now)
        if group.group_id in self.pending:
            return RegexUpdate(records, bump, None)
        last = max((r.timestamp for r in group.regexes.values()), default=None)
        if last is not None and now <= last + MIN_REFRESH_INTERVAL_MS:
            return RegexUpdate(records, bump, None)
        counts = {r: group.regex_users(r) for r in in_use}
        if old_regex:
            counts[old_regex] = counts.get(old_regex, 0) - 1
        if new_regex:
            counts[new_regex] = counts.get(new_regex, 0) + 1
        wanted = frozenset(r for r, n in counts.items() if n > 0)
        require = (require or len(wanted) != len(group.regexes)
                   or min((r.version for r in group.regexes.values()), default=-1) < version
                   or last is None or now > last + self.refresh_interval_ms)
        return RegexUpdate(records, bump, wanted if require and wanted else None)

    def results(self, group: ConsumerGroup, resolved: Mapping[str, ResolvedRegex]
                ) -> tuple[list[ConsumerRecord], dict[str, ResolvedRegex], bool]:
        """Kafka's ``handleRegularExpressionsResult``: a record for each regex the group still
        uses, the group's resolutions after them, and whether some regex now matches other topics."""
        records = []
        after = dict(group.regexes)
        changed = False
        for regex, value in sorted(resolved.items()):
            if group.regex_users(regex) == 0:
                continue
            old = group.regexes.get(regex)
            changed = changed or set(old.topics if old else ()) != set(value.topics)
            after[regex] = value
            records.append(ConsumerRecord(group.key(REGULAR_EXPRESSION, regex), value))
        return records, after, changed
