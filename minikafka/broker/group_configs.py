"""Dynamic group configs (config resource type GROUP = 32, Kafka 4.0): per-group overrides of a
KIP-848 consumer group's session timeout and heartbeat interval.

A group's overrides are set with IncrementalAlterConfigs or AlterConfigs and read with
DescribeConfigs, for any group id, whether the group exists or not; deleting a group leaves
them, as in Kafka 4.0. The consumer-protocol coordinator reads a group's session timeout each time
it re-arms a member's session (so a change reaches a member at its next heartbeat) and sends the
heartbeat interval in every heartbeat answer, as Kafka's ``GroupMetadataManager`` does. Classic
groups are not affected: their session timeout is their members'. The share-group configs Kafka
4.0 defines are validated, kept and described, though minikafka has no share groups.

Validation is Kafka's, in its order and with its messages: unknown names, the values' types and
lower limits (``GroupConfig``'s definitions), then the broker's bounds
(``group.consumer.min.session.timeout.ms`` and the others) and session timeout > heartbeat interval
(``GroupConfig.validateValues``), checked on the group's whole new set of overrides merged over the
broker's defaults. A single broker keeps the overrides in ``<data-dir>/minikafka-group-configs.json``;
a cluster's controller keeps them with its records (Kafka writes ConfigRecords to its metadata log).

Kafka: https://github.com/apache/kafka/blob/4.0/group-coordinator/src/main/java/org/apache/kafka/coordinator/group/GroupConfig.java,
``GroupConfigManager.java`` beside it, and ``core/src/main/scala/kafka/server/ConfigHelper.scala``.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from minikafka.config import BrokerConfig
from minikafka.errors import ErrorCode, KafkaError
from minikafka.startup_errors import DataDirError
from minikafka.storage.atomic_files import atomic_write

GROUP = 32
#: DescribeConfigs' ConfigSource of a group override (Kafka's GROUP_CONFIG, shown by clients as
#: DYNAMIC_GROUP_CONFIG) and of a value the group takes from the broker (DEFAULT_CONFIG).
GROUP_CONFIG, DEFAULT_CONFIG = 8, 5
#: DescribeConfigs' ConfigType values.
STRING, INT = 2, 3
INT_MIN, INT_MAX = -(2**31), 2**31 - 1


@dataclass(frozen=True)
class GroupConfigDef:
    """One group config: its DescribeConfigs type, Kafka's default, its lower limit, Kafka's
    documentation of it, and the broker setting a group takes its value from instead of the
    default, where Kafka has one (``GroupCoordinatorConfig.extractGroupConfigMap``)."""

    kind: int
    default: int | str
    minimum: int | None
    doc: str
    setting: str | None = None


_AUTO_RESET_DOC = (
    "The strategy to initialize the share-partition start offset. <ul><li>earliest: automatically reset the "
    "offset to the earliest offset</li><li>latest: automatically reset the offset to the latest offset</li>"
    "<li>by_duration:&lt;duration&gt;: automatically reset the offset to a configured duration from the current "
    "timestamp. &lt;duration&gt; must be specified in ISO8601 format (PnDTnHnMn.nS). Negative duration is not "
    "allowed.</li><li>anything else: throw exception to the share consumer.</li></ul>")

#: Kafka 4.0's group configs, in the order Kafka parses them.
GROUP_CONFIGS: dict[str, GroupConfigDef] = {
    "consumer.session.timeout.ms": GroupConfigDef(
        INT, 45000, 1, "The timeout to detect client failures when using the consumer group protocol.",
        "group.consumer.session.timeout.ms"),
    "consumer.heartbeat.interval.ms": GroupConfigDef(
        INT, 5000, 1, "The heartbeat interval given to the members of a consumer group.",
        "group.consumer.heartbeat.interval.ms"),
    "share.session.timeout.ms": GroupConfigDef(
        INT, 45000, 1, "The timeout to detect client failures when using the share group protocol."),
    "share.heartbeat.interval.ms": GroupConfigDef(
        INT, 5000, 1, "The heartbeat interval given to the members of a share group."),
    "share.record.lock.duration.ms": GroupConfigDef(
        INT, 30000, 1000, "The record acquisition lock duration in milliseconds for share groups.",
        "group.share.record.lock.duration.ms"),
    "share.auto.offset.reset": GroupConfigDef(STRING, "latest", None, _AUTO_RESET_DOC),
}

#: (group config, broker lower bound, broker upper bound) in the order Kafka checks them.
_BOUNDS = [(f"{kind}.{what}", f"group.{kind}.min.{what}", f"group.{kind}.max.{what}") for kind, what in (
    ("consumer", "heartbeat.interval.ms"), ("consumer", "session.timeout.ms"), ("share", "heartbeat.interval.ms"),
    ("share", "session.timeout.ms"), ("share", "record.lock.duration.ms"))]

_INTEGER = re.compile(r"[+-]?[0-9]+")
#: java.time.Duration.parse's ISO-8601 form (PnDTnHnMn.nS), as share.auto.offset.reset's by_duration takes it.
_DURATION = re.compile(r"([-+]?)P(?:([-+]?[0-9]+)D)?(T(?:([-+]?[0-9]+)H)?(?:([-+]?[0-9]+)M)?"
                       r"(?:([-+]?[0-9]+)(?:[.,]([0-9]{0,9}))?S)?)?", re.IGNORECASE)


def _invalid(message: str) -> KafkaError:
    return KafkaError(ErrorCode.INVALID_CONFIG, message)


def _java_trim(text: str) -> str:
    """``String.trim()``: strips every character up to U+0020, as Kafka's config parser does."""
    return text.strip("".join(chr(c) for c in range(33)))


def _duration_ok(text: str) -> bool:
    """A non-negative ISO-8601 duration (``java.time.Duration.parse`` and Kafka's sign check)."""
    m = _DURATION.fullmatch(text)
    if m is None or (m[2] is None and m[3] is None) or m[3] == "T" or m[3] == "t":
        return False
    sign = -1 if m[1] == "-" else 1
    parts = [(m[2], 86400), (m[4], 3600), (m[5], 60), (m[6], 1)]
    nanos = sum(int(value) * scale * 10**9 for value, scale in parts if value is not None)
    if m[7]:
        fraction = int(m[7].ljust(9, "0"))
        nanos += -fraction if (m[6] or "").startswith("-") else fraction
    return sign * nanos >= 0


def _auto_reset_ok(text: str) -> bool:
    """What ``ShareGroupAutoOffsetResetStrategy`` accepts: earliest, latest or by_duration:<ISO-8601>."""
    if text in ("earliest", "latest"):
        return True
    return text.startswith("by_duration:") and _duration_ok(text[len("by_duration:"):])


def _parse(name: str, raw: str | int) -> int | str:
    """One value as Kafka's ConfigDef parses and checks it (ConfigException -> INVALID_CONFIG)."""
    spec = GROUP_CONFIGS[name]
    if spec.kind == STRING:
        text = _java_trim(str(raw))
        if name == "share.auto.offset.reset" and not _auto_reset_ok(text):
            raise _invalid(f"Invalid value {text} for configuration {name}: Invalid value `{text}` for configuration "
                           f"{name}. The value must be either 'earliest', 'latest' or of the format "
                           f"'by_duration:<PnDTnHnMn.nS.>'.")
        return text
    if isinstance(raw, int):
        value = raw
    else:
        text = _java_trim(raw)
        if not _INTEGER.fullmatch(text) or not INT_MIN <= int(text) <= INT_MAX:
            raise _invalid(f"Invalid value {raw} for configuration {name}: Not a number of type INT")
        value = int(text)
    if spec.minimum is not None and value < spec.minimum:
        raise _invalid(f"Invalid value {value} for configuration {name}: Value must be at least {spec.minimum}")
    return value


class GroupConfigStore(Protocol):
    """Where a broker's group overrides live: its data dir (single broker) or the controller."""

    def group_overrides(self, group_id: str) -> Mapping[str, str]: ...

    def set_group_overrides(self, group_id: str, configs: Mapping[str, str]) -> None: ...


class GroupConfigs:
    """The group configs a broker answers and its coordinator uses (see the module docstring)."""

    def __init__(self, config: BrokerConfig, store: GroupConfigStore, offered: bool) -> None:
        """``offered``: the release answered has GROUP configs (4.0 on; 3.9 has none)."""
        self.config = config
        self.store = store
        self.offered = offered

    def default(self, name: str) -> int | str:
        """The value a group without an override of ``name`` has."""
        spec = GROUP_CONFIGS[name]
        return spec.default if spec.setting is None else self.config.get(spec.setting)

    def overrides(self, group_id: str) -> dict[str, str]:
        return dict(self.store.group_overrides(group_id))

    def effective(self, group_id: str) -> dict[str, tuple[int | str, bool]]:
        """Every group config of ``group_id``: its value and whether it is the group's override (an
        override that no longer parses, which validation prevents, reads as the default)."""
        overrides = self.store.group_overrides(group_id)
        out: dict[str, tuple[int | str, bool]] = {}
        for name in GROUP_CONFIGS:
            try:
                out[name] = (_parse(name, overrides[name]), True) if name in overrides else (self.default(name), False)
            except KafkaError:
                out[name] = (self.default(name), False)
        return out

    def consumer_session_ms(self, group_id: str) -> int:
        """The session timeout of the members of consumer group ``group_id``."""
        return int(self.effective(group_id)["consumer.session.timeout.ms"][0])

    def consumer_heartbeat_ms(self, group_id: str) -> int:
        """The heartbeat interval consumer group ``group_id`` gives its members."""
        return int(self.effective(group_id)["consumer.heartbeat.interval.ms"][0])

    def check(self, overrides: Mapping[str, str]) -> None:
        """Kafka's validation of a group's whole new set of overrides (``GroupConfig.validate``)."""
        for name in overrides:
            if name not in GROUP_CONFIGS:
                raise _invalid(f"Unknown group config name: {name}")
        values = {name: _parse(name, overrides[name] if name in overrides else self.default(name))
                  for name in GROUP_CONFIGS}
        for name, lower, upper in _BOUNDS:
            if int(values[name]) < int(self.config.get(lower)):
                raise _invalid(f"{name} must be greater than or equal to {lower}")
            if int(values[name]) > int(self.config.get(upper)):
                raise _invalid(f"{name} must be less than or equal to {upper}")
        for kind in ("consumer", "share"):
            if int(values[f"{kind}.session.timeout.ms"]) <= int(values[f"{kind}.heartbeat.interval.ms"]):
                raise _invalid(f"{kind}.session.timeout.ms must be greater than {kind}.heartbeat.interval.ms")

    def alter(self, group_id: str, overrides: Mapping[str, str], validate_only: bool) -> None:
        """Replace ``group_id``'s overrides with ``overrides`` once they pass :meth:`check`."""
        if group_id == "":
            raise KafkaError(ErrorCode.INVALID_REQUEST, "Default group resources are not allowed.")
        self.check(overrides)
        if not validate_only:
            self.store.set_group_overrides(group_id, dict(overrides))


class GroupConfigFile:
    """A single broker's group overrides: ``<data-dir>/minikafka-group-configs.json``, rewritten
    atomically on every change (changes are rare), read once at start."""

    NAME = "minikafka-group-configs.json"

    def __init__(self, data_dir: Path) -> None:
        self.path = Path(data_dir) / self.NAME
        self._groups = self._load()

    def _load(self) -> dict[str, dict[str, str]]:
        try:
            doc = json.loads(self.path.read_bytes())
        except FileNotFoundError:
            return {}
        except (OSError, ValueError) as exc:
            raise DataDirError(f"{self.path}: not a minikafka group configs file ({exc})") from None
        groups = doc.get("groups") if isinstance(doc, dict) and doc.get("version") == 1 else None
        if not isinstance(groups, dict) or not all(
                isinstance(c, dict) and all(isinstance(v, str) for v in c.values()) for c in groups.values()):
            raise DataDirError(f"{self.path}: not a minikafka group configs file (expected version 1 and "
                               f"group -> name -> value)")
        return {str(g): {str(k): v for k, v in c.items()} for g, c in groups.items()}

    def group_overrides(self, group_id: str) -> Mapping[str, str]:
        return self._groups.get(group_id, {})

    def set_group_overrides(self, group_id: str, configs: Mapping[str, str]) -> None:
        groups = dict(self._groups)
        if configs:
            groups[group_id] = dict(configs)
        else:
            groups.pop(group_id, None)
        atomic_write(self.path, json.dumps({"version": 1, "groups": groups}, indent=1, sort_keys=True).encode())
        self._groups = groups
