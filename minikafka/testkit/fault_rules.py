"""Fault rules as data: what a rule matches, when it fires, what it does, and the checks a rule
passes before any broker takes it (:mod:`.faults` applies them to requests).

A rule is built from a dict (a rule file's entry, an HTTP body, Python keywords) by
:meth:`FaultRule.from_dict`, which refuses unknown fields and bad values with a
:class:`FaultRuleError`; :func:`check_rules` then resolves API names against the APIs a broker
serves, and broker ids against the brokers there are.
"""

from __future__ import annotations

import difflib
import fnmatch
import time
from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from minikafka.errors import ErrorCode

if TYPE_CHECKING:
    from minikafka.broker.dispatch import ApiSpec

ACTIONS = ("error_before", "error_after", "drop_response", "delay", "close", "crash")
TRIGGERS = ("once", "next", "every", "nth", "always")
DROP_MODES = ("close", "hold")
DEFAULT_HOLD_MS = 30_000
DEFAULT_ERROR = ErrorCode.NOT_LEADER_OR_FOLLOWER
_KNOWN_FIELDS = frozenset({
    "id", "action", "api", "topic", "partition", "client_id", "trigger", "n", "error", "message",
    "mode", "hold_ms", "delay_ms", "restart_after_ms", "broker", "from_broker",
})


class FaultRuleError(ValueError):
    """A rule that cannot be used as written."""


def parse_error_code(value: Any) -> int:
    """An error code from its number or Kafka's name (``NOT_LEADER_OR_FOLLOWER``, any case)."""
    if isinstance(value, bool):
        raise FaultRuleError(f"not an error code: {value!r}")
    if isinstance(value, int):
        return value
    text = str(value).strip()
    try:
        return int(text)
    except ValueError:
        pass
    try:
        return int(ErrorCode[text.upper().replace("-", "_").replace(" ", "_")])
    except KeyError:
        raise FaultRuleError(f"unknown error code {value!r}") from None


def _parse_trigger(trigger: Any, n: Any) -> tuple[str, int]:
    text = str(trigger or "once").strip().lower()
    if ":" in text:  # shorthand "next:3", "every:2", "nth:5"
        text, _, count = text.partition(":")
        n = count
    if text not in TRIGGERS:
        raise FaultRuleError(f"trigger must be one of {', '.join(TRIGGERS)}, got {trigger!r}")
    if n is None:
        n = 1
    return text, _whole_number(n, 1, "n must be a positive integer", "n must be a positive integer")


def _whole_number(value: Any, minimum: int, not_a_number: str, too_small: str) -> int:
    """``value`` as an int of at least ``minimum``, else a FaultRuleError: ``not_a_number`` or
    ``too_small``, followed by the value given."""
    try:
        number = int(value)
    except (TypeError, ValueError):
        raise FaultRuleError(f"{not_a_number}, got {value!r}") from None
    if number < minimum:
        raise FaultRuleError(f"{too_small}, got {value!r}")
    return number


def _node_ids(value: Any, name: str) -> list[int]:
    """A node id or a list of them (``broker: 2``, ``broker: [1, 3]``)."""
    ids = []
    for item in _as_list(value):
        if isinstance(item, bool) or not isinstance(item, (int, str)):
            raise FaultRuleError(f"{name} must be a node id or a list of them, got {value!r}")
        ids.append(_whole_number(item, 0, f"{name} must be a node id or a list of them",
                                 f"{name} must be a node id (0 or more)"))
    return ids


def _from_broker(value: Any) -> bool | list[int] | None:
    """``from_broker``: true (any broker's request), false (only clients'), or node ids."""
    if value is None or isinstance(value, bool):
        return value
    if isinstance(value, str) and value.strip().lower() in ("true", "false"):
        return value.strip().lower() == "true"
    return _node_ids(value, "from_broker") or None


def _as_list(value: Any) -> list[Any]:
    if value is None:
        return []
    if isinstance(value, (list, tuple, set, frozenset)):
        return list(value)
    return [value]


@dataclass
class FaultRule:
    """One rule; build it with :meth:`from_dict` (which validates) or keyword arguments."""

    action: str
    id: str = ""
    api: list[int | str] = field(default_factory=list)  # API keys or names; empty = every API
    topic: str | None = None  # a topic name or glob pattern
    partition: int | None = None
    client_id: str | None = None  # a client id or glob pattern
    trigger: str = "once"
    n: int = 1
    error: int = int(DEFAULT_ERROR)
    message: str | None = None
    mode: str = "close"
    hold_ms: int = DEFAULT_HOLD_MS
    delay_ms: int = 0
    restart_after_ms: int | None = None
    broker: list[int] = field(default_factory=list)  # the brokers it applies on; empty = every broker
    #: requests sent by brokers: True any broker's, False only clients', or these node ids
    from_broker: bool | list[int] | None = None
    # counters, updated on the brokers' loop: in total (the trigger counts these) and per broker
    matched: int = 0
    fired: int = 0
    last_fired: float | None = None
    by_broker: dict[int, dict[str, int]] = field(default_factory=dict)

    @classmethod
    def from_dict(cls, spec: Mapping[str, Any]) -> FaultRule:
        if not isinstance(spec, Mapping):
            raise FaultRuleError(f"a rule must be an object, got {type(spec).__name__}")
        unknown = set(spec) - _KNOWN_FIELDS
        if unknown:
            raise FaultRuleError(f"unknown rule field(s): {', '.join(sorted(unknown))}")
        action = str(spec.get("action", "")).strip().lower()
        if action not in ACTIONS:
            raise FaultRuleError(f"action must be one of {', '.join(ACTIONS)}, got {spec.get('action')!r}")
        trigger, n = _parse_trigger(spec.get("trigger"), spec.get("n"))
        apis: list[int | str] = []
        for api in _as_list(spec.get("api")):
            if isinstance(api, bool) or not isinstance(api, (int, str)):
                raise FaultRuleError(f"api must be a name or key, got {api!r}")
            apis.append(int(api) if isinstance(api, str) and api.strip().isdigit() else api)
        partition = spec.get("partition")
        if partition is not None:
            if isinstance(partition, bool) or not isinstance(partition, (int, str)):
                raise FaultRuleError(f"partition must be an integer, got {partition!r}")
            try:
                partition = int(partition)
            except ValueError:
                raise FaultRuleError(f"partition must be an integer, got {partition!r}") from None
        mode = str(spec.get("mode", "close")).strip().lower()
        if mode not in DROP_MODES:
            raise FaultRuleError(f"mode must be close or hold, got {spec.get('mode')!r}")
        rule = cls(
            action=action,
            id=str(spec.get("id") or ""),
            api=apis,
            topic=None if spec.get("topic") is None else str(spec["topic"]),
            partition=partition,
            client_id=None if spec.get("client_id") is None else str(spec["client_id"]),
            trigger=trigger,
            n=n,
            error=parse_error_code(spec["error"]) if spec.get("error") is not None else int(DEFAULT_ERROR),
            message=None if spec.get("message") is None else str(spec["message"]),
            mode=mode,
            hold_ms=_millis(spec, "hold_ms", DEFAULT_HOLD_MS),
            delay_ms=_millis(spec, "delay_ms", 0),
            restart_after_ms=_millis(spec, "restart_after_ms", None),
            broker=_node_ids(spec.get("broker"), "broker"),
            from_broker=_from_broker(spec.get("from_broker")),
        )
        if action == "delay" and rule.delay_ms <= 0:
            raise FaultRuleError("a delay rule needs delay_ms > 0")
        return rule

    # ----------------------------------------------------------------- matching
    def selects(self, topic: str, partition: int | None) -> bool:
        """Whether a topic entry (partition None) or partition entry is in this rule's scope."""
        if self.topic is not None and not fnmatch.fnmatchcase(topic, self.topic):
            return False
        if partition is None:
            return self.partition is None
        return self.partition is None or partition == self.partition

    @property
    def scoped(self) -> bool:
        return self.topic is not None or self.partition is not None

    def applies_on(self, node_id: int) -> bool:
        """Whether the rule is in force on broker ``node_id`` (``broker`` names it, or nothing)."""
        return not self.broker or node_id in self.broker

    def matches(self, api_keys: frozenset[int], api_key: int, client_id: str | None,
                request_targets: list[tuple[str, int | None]] | None, sender: int | None = None) -> bool:
        """Whether a request matches; ``sender`` is the node id of the broker that sent it (a
        follower's Fetch), None for a client's."""
        if api_keys and api_key not in api_keys:
            return False
        if self.client_id is not None and not fnmatch.fnmatchcase(client_id or "", self.client_id):
            return False
        if self.from_broker is not None:
            if isinstance(self.from_broker, bool):
                if self.from_broker != (sender is not None):
                    return False
            elif sender not in self.from_broker:
                return False
        if self.scoped:
            assert request_targets is not None
            return any(self.selects(t, p) for t, p in request_targets)
        return True

    def count_and_decide(self, node_id: int | None = None) -> bool:
        """Count one matching request (on broker ``node_id``); True if the rule fires for it. The
        trigger counts the requests of every broker together: ``once`` fires once in a cluster."""
        self.matched += 1
        on_broker = self.by_broker.setdefault(node_id, {"matched": 0, "fired": 0}) if node_id is not None else None
        if on_broker is not None:
            on_broker["matched"] += 1
        if self.trigger == "always":
            fire = True
        elif self.trigger == "once":
            fire = self.fired == 0
        elif self.trigger == "next":
            fire = self.fired < self.n
        elif self.trigger == "every":
            fire = self.matched % self.n == 0
        else:  # nth
            fire = self.matched == self.n
        if fire:
            self.fired += 1
            self.last_fired = time.time()
            if on_broker is not None:
                on_broker["fired"] += 1
        return fire

    @property
    def spent(self) -> bool:
        """True when the rule can never fire again."""
        if self.trigger == "once":
            return self.fired >= 1
        if self.trigger == "next":
            return self.fired >= self.n
        if self.trigger == "nth":
            return self.matched >= self.n
        return False

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "id": self.id, "action": self.action, "api": self.api, "topic": self.topic,
            "partition": self.partition, "client_id": self.client_id, "broker": self.broker,
            "from_broker": self.from_broker, "trigger": self.trigger, "n": self.n,
        }
        if self.action in ("error_before", "error_after"):
            out["error"] = self.error
            out["error_name"] = _error_name(self.error)
            out["message"] = self.message
        if self.action == "drop_response":
            out["mode"] = self.mode
            out["hold_ms"] = self.hold_ms
        if self.action == "delay":
            out["delay_ms"] = self.delay_ms
        if self.action == "crash":
            out["restart_after_ms"] = self.restart_after_ms
        out.update(matched=self.matched, fired=self.fired, spent=self.spent, last_fired=self.last_fired,
                   by_broker={str(node): dict(counts) for node, counts in sorted(self.by_broker.items())})
        return out


def _millis(spec: Mapping[str, Any], name: str, default: int | None) -> Any:
    value = spec.get(name)
    if value is None:
        return default
    if isinstance(value, bool):
        raise FaultRuleError(f"{name} must be a number of milliseconds, got {value!r}")
    return _whole_number(value, 0, f"{name} must be a number of milliseconds", f"{name} must not be negative")


def _error_name(code: int) -> str:
    try:
        return ErrorCode(code).name
    except ValueError:
        return str(code)


def rule_specs(data: Any) -> list[dict[str, Any]]:
    """Normalise a rule, a list of rules or ``{"rules": [...]}`` to a list of rule specs."""
    if data is None:
        return []
    if isinstance(data, Mapping) and "rules" in data and "action" not in data:
        data = data["rules"]
    if isinstance(data, Mapping):
        return [dict(data)]
    if isinstance(data, list):
        for position, item in enumerate(data, 1):
            if not isinstance(item, Mapping):
                raise FaultRuleError(f"rule {position}: expected an object with an action, got {item!r}")
        return [dict(item) for item in data]
    raise FaultRuleError("expected a rule object, a list of rules or {\"rules\": [...]}")


def check_rules(specs: Iterable[FaultRule | Mapping[str, Any]], api_table: Mapping[int, ApiSpec],
                taken_ids: Iterable[str] = (), label_each: bool = False,
                node_ids: Collection[int] | None = None) -> list[tuple[FaultRule, frozenset[int]]]:
    """Build and check rules in order: fields, API names and keys (against ``api_table``), broker
    ids (against ``node_ids``, when given) and rule ids (unique, and not in ``taken_ids``). Returns
    each rule with the API keys it matches; the first bad rule raises :class:`FaultRuleError`,
    which names its position (rule 1 is the first) and id when ``label_each`` or when there is
    more than one rule."""
    specs = list(specs)
    taken = set(taken_ids)
    checked = []
    for position, spec in enumerate(specs, 1):
        try:
            rule = spec if isinstance(spec, FaultRule) else FaultRule.from_dict(spec)
            if rule.action not in ACTIONS:
                raise FaultRuleError(f"unknown action {rule.action!r}")
            checked.append((rule, resolve_apis(rule.api, api_table)))
            if node_ids is not None:
                _check_brokers(rule, node_ids)
            if rule.id:
                if rule.id in taken:
                    raise FaultRuleError(f"a rule with id {rule.id!r} exists already")
                taken.add(rule.id)
        except FaultRuleError as exc:
            if not (label_each or len(specs) > 1):
                raise
            rule_id = spec.id if isinstance(spec, FaultRule) else spec.get("id") if isinstance(spec, Mapping) else None
            label = f"rule {position}" + (f" (id {rule_id!r})" if rule_id else "")
            raise FaultRuleError(f"{label}: {exc}") from None
    return checked


def _check_brokers(rule: FaultRule, node_ids: Collection[int]) -> None:
    named = [("broker", rule.broker)]
    if isinstance(rule.from_broker, list):
        named.append(("from_broker", rule.from_broker))
    for name, ids in named:
        unknown = [n for n in ids if n not in node_ids]
        if unknown:
            there = ", ".join(str(n) for n in sorted(node_ids))
            raise FaultRuleError(f"{name} {unknown[0]}: no such broker (the brokers are {there})")


def resolve_apis(apis: list[int | str], api_table: Mapping[int, ApiSpec]) -> frozenset[int]:
    """The API keys a rule's ``api`` names (``Produce``, ``produce``, ``ProduceRequest`` or ``0``);
    a key minikafka does not serve or an unknown name (with the close ones) is a FaultRuleError."""
    by_name = {spec.name.lower(): key for key, spec in api_table.items()}
    keys = set()
    for api in apis:
        if isinstance(api, int):
            if api not in api_table:
                raise FaultRuleError(f"minikafka does not serve API key {api} (it serves {_key_ranges(api_table)})")
            keys.add(api)
            continue
        key = by_name.get(api.strip().lower().removesuffix("request"))
        if key is None:
            names = {spec.name.lower(): spec.name for spec in api_table.values()}
            close = [names[n] for n in difflib.get_close_matches(api.strip().lower(), list(names), n=3)]
            hint = f"did you mean {' or '.join(close)}?" if close else f"known: {', '.join(sorted(names.values()))}"
            raise FaultRuleError(f"unknown API {api!r}; {hint}")
        keys.add(key)
    return frozenset(keys)


def _key_ranges(api_table: Mapping[int, ApiSpec]) -> str:
    """``0-3, 8-12, 18`` for the keys of ``api_table``."""
    runs: list[list[int]] = []
    for key in sorted(api_table):
        if runs and key == runs[-1][-1] + 1:
            runs[-1].append(key)
        else:
            runs.append([key])
    return ", ".join(f"{run[0]}-{run[-1]}" if len(run) > 1 else str(run[0]) for run in runs)
