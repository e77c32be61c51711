"""Deterministic faults for the tests of minikafka's users.

A :class:`FaultRule` says which requests it matches (API, topic, partition, client id), when
it fires (``once``, the ``next`` n matching requests, ``every`` n-th, only the ``nth``, or
``always``) and what it does:

``error_before``
    answer the matched topics/partitions with an error without handling them (nothing is
    appended); the rest of the request is handled normally.
``error_after``
    handle the request (append), then answer the matched parts with an error.
``drop_response``
    handle the request (append), then never answer: close the connection (``mode: close``)
    or hold the response until the client gives up (``mode: hold``, bounded by ``hold_ms``).
    This is the case idempotence exists for: the batch is in the log, the client never heard.
``delay``
    handle the request, then answer ``delay_ms`` later.
``close``
    close the connection without handling the request.
``crash``
    handle the request, then crash the broker (no flush, no snapshot, no clean-shutdown
    marker) without answering; with ``restart_after_ms`` it starts again from the same data
    directory on the same port.

:class:`FaultInjector` is the broker's ``interceptor``: the broker hands it every decoded
request. Rules are checked in the order they were added; the first one that fires acts, and
later rules do not see that request. Every rule counts the requests it matched and how often
it fired.
"""

from __future__ import annotations

import asyncio
import difflib
import fnmatch
import itertools
import logging
import time
from collections.abc import Callable, Coroutine, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from minikafka.broker.context import CloseConnection, RequestContext
from minikafka.broker.dispatch import ApiSpec
from minikafka.errors import ErrorCode
from minikafka.protocol.apis import ApiKey
from minikafka.testkit import fault_messages as messages

if TYPE_CHECKING:
    from prometheus_client.core import Metric

    from minikafka.broker.server import Broker

log = logging.getLogger(__name__)

ACTIONS = ("error_before", "error_after", "drop_response", "delay", "close", "crash")
TRIGGERS = ("once", "next", "every", "nth", "always")
DROP_MODES = ("close", "hold")
#: how long a held response may be held at most, whatever the rule says
MAX_HOLD_MS = 300_000
DEFAULT_HOLD_MS = 30_000
DEFAULT_ERROR = ErrorCode.NOT_LEADER_OR_FOLLOWER
#: APIs that change nothing: ``error_before`` may handle them and rewrite the answer, which
#: keeps a partly matched Fetch from turning into a long poll over no partitions
READ_ONLY_API_KEYS = frozenset({ApiKey.FETCH, ApiKey.LIST_OFFSETS, ApiKey.API_VERSIONS, ApiKey.DESCRIBE_CONFIGS,
                                ApiKey.DESCRIBE_CLUSTER, ApiKey.DESCRIBE_PRODUCERS, ApiKey.CONSUMER_GROUP_DESCRIBE})

_KNOWN_FIELDS = frozenset({
    "id", "action", "api", "topic", "partition", "client_id", "trigger", "n", "error", "message",
    "mode", "hold_ms", "delay_ms", "restart_after_ms",
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
    # counters, updated on the broker's loop
    matched: int = 0
    fired: int = 0
    last_fired: float | None = None

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

    def matches(self, api_keys: frozenset[int], api_key: int, client_id: str | None,
                request_targets: list[tuple[str, int | None]] | None) -> bool:
        if api_keys and api_key not in api_keys:
            return False
        if self.client_id is not None and not fnmatch.fnmatchcase(client_id or "", self.client_id):
            return False
        if self.scoped:
            assert request_targets is not None
            return any(self.selects(t, p) for t, p in request_targets)
        return True

    def count_and_decide(self) -> bool:
        """Count one matching request; True if the rule fires for it."""
        self.matched += 1
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
            "partition": self.partition, "client_id": self.client_id, "trigger": self.trigger, "n": self.n,
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
        out.update(matched=self.matched, fired=self.fired, spent=self.spent, last_fired=self.last_fired)
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
                taken_ids: Iterable[str] = (), label_each: bool = False) -> list[tuple[FaultRule, frozenset[int]]]:
    """Build and check rules in order: fields, API names and keys (against ``api_table``) and ids
    (unique, and not in ``taken_ids``). Returns each rule with the API keys it matches; the first
    bad rule raises :class:`FaultRuleError`, which names its position (rule 1 is the first) and id
    when ``label_each`` or when there is more than one rule."""
    specs = list(specs)
    taken = set(taken_ids)
    checked = []
    for position, spec in enumerate(specs, 1):
        try:
            rule = spec if isinstance(spec, FaultRule) else FaultRule.from_dict(spec)
            if rule.action not in ACTIONS:
                raise FaultRuleError(f"unknown action {rule.action!r}")
            checked.append((rule, resolve_apis(rule.api, api_table)))
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


#: ``crash(restart_after_ms)``: what the injector calls for the ``crash`` action
CrashHook = Callable[[int | None], Coroutine[Any, Any, None]]


class FaultInjector:
    """The broker's interceptor: applies the first rule that fires to each request."""

    def __init__(self, broker: Broker, crash: CrashHook | None = None) -> None:
        self.broker = broker
        self.crash_hook = crash
        self._rules: list[FaultRule] = []
        self._api_keys: dict[str, frozenset[int]] = {}
        self._ids = itertools.count(1)

    # ----------------------------------------------------------------- rules
    @property
    def rules(self) -> list[FaultRule]:
        return list(self._rules)

    def add(self, spec: FaultRule | Mapping[str, Any]) -> FaultRule:
        return self.add_all([spec])[0]

    def add_all(self, specs: Iterable[FaultRule | Mapping[str, Any]]) -> list[FaultRule]:
        """Add several rules, in order; none is added if one of them is invalid."""
        checked = check_rules(specs, self.broker.api_table, (r.id for r in self._rules))
        if self.crash_hook is None and any(rule.action == "crash" for rule, _keys in checked):
            raise FaultRuleError("this broker has no lifecycle control: crash rules cannot be used")
        taken = {r.id for r in self._rules} | {rule.id for rule, _keys in checked}
        for rule, api_keys in checked:
            while not rule.id:
                candidate = f"r{next(self._ids)}"
                if candidate not in taken:
                    rule.id = candidate
                    taken.add(candidate)
            self._rules.append(rule)
            self._api_keys[rule.id] = api_keys
            log.info("fault rule %s added: %s", rule.id, rule.to_dict())
        return [rule for rule, _keys in checked]

    def get(self, rule_id: str) -> FaultRule | None:
        return next((r for r in self._rules if r.id == rule_id), None)

    def remove(self, rule_id: str) -> bool:
        rule = self.get(rule_id)
        if rule is None:
            return False
        self._rules.remove(rule)
        self._api_keys.pop(rule_id, None)
        return True

    def clear(self) -> int:
        count = len(self._rules)
        self._rules.clear()
        self._api_keys.clear()
        return count

    # ----------------------------------------------------------------- requests
    def _firing_rule(self, spec: ApiSpec, ctx: RequestContext, request: Any) -> FaultRule | None:
        request_targets: list[tuple[str, int | None]] | None = None
        for rule in self._rules:
            if rule.scoped and request_targets is None:
                request_targets = messages.targets(request)
            if rule.matches(self._api_keys.get(rule.id, frozenset()), spec.key, ctx.client_id, request_targets):
                if rule.count_and_decide():
                    return rule
        return None

    async def dispatch(self, spec: ApiSpec, ctx: RequestContext, request: Any) -> Any:
        rule = self._firing_rule(spec, ctx, request) if self._rules else None
        if rule is None:
            return await spec.handler(ctx, request)
        log.info("fault rule %s (%s) fires on %s from %r", rule.id, rule.action, spec.name, ctx.client_id)
        action = rule.action
        if action == "close":
            raise CloseConnection(f"fault rule {rule.id}: close before handling")
        if action == "error_before":
            return await self._error_before(rule, spec, ctx, request)
        response = await spec.handler(ctx, request)
        if action == "error_after":
            if response is not None:
                messages.rewrite_errors(response, self._selector(rule), rule.error, self._message(rule))
            return response
        if action == "delay":
            await self._pause(ctx, rule.delay_ms)
            return response
        if action == "drop_response":
            if rule.mode == "hold":
                await self._hold(ctx, rule)
            raise CloseConnection(f"fault rule {rule.id}: response dropped after handling")
        # crash: the request was handled; the broker dies before it answers
        assert self.crash_hook is not None
        asyncio.get_running_loop().create_task(self.crash_hook(rule.restart_after_ms))
        raise CloseConnection(f"fault rule {rule.id}: crash after handling")

    def _selector(self, rule: FaultRule) -> messages.Selector | None:
        return rule.selects if rule.scoped else None

    def _message(self, rule: FaultRule) -> str:
        return rule.message or f"minikafka fault rule {rule.id}"

    async def _error_before(self, rule: FaultRule, spec: ApiSpec, ctx: RequestContext, request: Any) -> Any:
        message = self._message(rule)
        if spec.key in READ_ONLY_API_KEYS:
            response = await spec.handler(ctx, request)
            if response is not None:
                messages.rewrite_errors(response, self._selector(rule), rule.error, message)
            return response
        if not rule.scoped or not messages.targets(request):
            # The whole request: answer with the error everywhere, handle nothing.
            if getattr(request, "acks", None) == 0:
                raise CloseConnection(f"fault rule {rule.id}: acks=0 produce answered with an error")
            split = messages.SplitRequest(request, lambda topic, partition: True)
            split.remove()
            response = spec.response[ctx.api_version]()
            split.merge(response, rule.error, message)
            messages.set_error(response, rule.error, message)
            return response
        split = messages.SplitRequest(request, rule.selects)
        split.remove()
        if getattr(request, "acks", None) == 0 and split.removed:
            if split.kept_any:
                await spec.handler(ctx, request)
            raise CloseConnection(f"fault rule {rule.id}: acks=0 produce answered with an error")
        if split.kept_any:
            response = await spec.handler(ctx, request)
        else:
            response = spec.response[ctx.api_version]()
        if response is not None:
            split.merge(response, rule.error, message)
        return response

    async def _hold(self, ctx: RequestContext, rule: FaultRule) -> None:
        """Hold the answer until the client closes the connection, or ``hold_ms`` passes."""
        await self._pause(ctx, min(rule.hold_ms, MAX_HOLD_MS), until_client_leaves=True)

    async def _pause(self, ctx: RequestContext, millis: int, until_client_leaves: bool = False) -> None:
        """Sleep ``millis``, cut short when the broker is stopping (a clean stop waits for
        requests in progress) or, with ``until_client_leaves``, when the client has gone."""
        deadline = time.monotonic() + millis / 1000
        conn = ctx.connection
        while (remaining := deadline - time.monotonic()) > 0:
            if not self.broker.started or conn.closed:
                return
            if until_client_leaves and (conn.reader.at_eof() or conn.transport.is_closing()):
                return
            await asyncio.sleep(min(remaining, 0.02))


class FaultRuleCollector:
    """The rules' counts for ``GET /metrics``, beside the broker's own numbers
    (``minikafka.broker.prometheus.render(broker, FaultRuleCollector(injector))``)."""

    def __init__(self, faults: FaultInjector) -> None:
        self.faults = faults

    def collect(self) -> Iterator[Metric]:
        from prometheus_client.core import CounterMetricFamily  # scraped only through the admin endpoint

        fired = CounterMetricFamily("minikafka_fault_rule_fired", "Times a fault rule acted on a request.",
                                    labels=["rule", "action"])
        matched = CounterMetricFamily("minikafka_fault_rule_matched", "Requests a fault rule matched.",
                                      labels=["rule", "action"])
        for rule in self.faults.rules:
            fired.add_metric([str(rule.id), rule.action], rule.fired)
            matched.add_metric([str(rule.id), rule.action], rule.matched)
        yield fired
        yield matched
