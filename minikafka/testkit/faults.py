"""Deterministic faults for the tests of minikafka's users.

A :class:`FaultRule` (:mod:`.fault_rules`) says which requests it matches (API, topic, partition,
client id; in a cluster the brokers it is in force on and the brokers whose requests it takes), when
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
request. It reads a :class:`FaultRuleSet`, its own or, in a cluster, the one every broker's
injector shares. Rules are checked in the order they were added; the first one that fires acts,
and later rules do not see that request. Every rule counts the requests it matched and how often
it fired, in total and per broker.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
import time
from collections.abc import Callable, Collection, Coroutine, Iterable, Iterator, Mapping
from typing import TYPE_CHECKING, Any

from minikafka.broker.context import CloseConnection, RequestContext
from minikafka.broker.dispatch import ApiSpec
from minikafka.broker.handlers import fetch
from minikafka.protocol.apis import ApiKey
from minikafka.testkit import fault_messages as messages
from minikafka.testkit.fault_rules import (
    ACTIONS,
    DEFAULT_ERROR,
    DEFAULT_HOLD_MS,
    DROP_MODES,
    TRIGGERS,
    FaultRule,
    FaultRuleError,
    check_rules,
    parse_error_code,
    resolve_apis,
    rule_specs,
)
from minikafka.testkit.isolation import peer_of

if TYPE_CHECKING:
    from prometheus_client.core import Metric

    from minikafka.broker.server import Broker

__all__ = ["ACTIONS", "DEFAULT_ERROR", "DEFAULT_HOLD_MS", "DROP_MODES", "MAX_HOLD_MS", "READ_ONLY_API_KEYS",
           "TRIGGERS", "CrashHook", "FaultInjector", "FaultRule", "FaultRuleCollector", "FaultRuleError",
           "FaultRuleSet", "check_rules", "parse_error_code", "resolve_apis", "rule_specs", "sender_of"]

log = logging.getLogger(__name__)

#: how long a held response may be held at most, whatever the rule says
MAX_HOLD_MS = 300_000
#: APIs that change nothing: ``error_before`` may handle them and rewrite the answer, which
#: keeps a partly matched Fetch from turning into a long poll over no partitions
READ_ONLY_API_KEYS = frozenset({ApiKey.FETCH, ApiKey.LIST_OFFSETS, ApiKey.API_VERSIONS, ApiKey.DESCRIBE_CONFIGS,
                                ApiKey.DESCRIBE_CLUSTER, ApiKey.DESCRIBE_PRODUCERS, ApiKey.CONSUMER_GROUP_DESCRIBE})

#: ``crash(restart_after_ms)``: what the injector calls for the ``crash`` action
CrashHook = Callable[[int | None], Coroutine[Any, Any, None]]


def topic_names(spec: ApiSpec, ctx: RequestContext) -> messages.TopicNames | None:
    """The names of the topics a request names by id (Fetch v13+), None for requests by name."""
    if spec.key == ApiKey.FETCH and ctx.api_version >= fetch.TOPIC_IDS:
        return fetch.topic_names(ctx)
    return None


def sender_of(spec: ApiSpec, ctx: RequestContext, request: Any) -> int | None:
    """The node id of the broker that sent a request, None for a client's: a Fetch says it in its
    ``replica_id`` (a follower's fetch), the cluster's other requests in their client id."""
    if spec.key == ApiKey.FETCH:
        replica_id = fetch.replica_id_of(ctx.api_version, request)
        return replica_id if replica_id >= 0 else None
    return peer_of(ctx.client_id)


class FaultRuleSet:
    """The rules in force, in order, with the API keys each matches: one broker's, or a cluster's,
    read by the injector of every broker (so a rule is added once, applies on each broker it names,
    and its counters add up across them). ``node_ids`` are the brokers a rule may name; ``crash``
    says whether something can crash a broker (else ``crash`` rules are refused)."""

    def __init__(self, api_table: Mapping[int, ApiSpec], node_ids: Collection[int], crash: bool) -> None:
        self.api_table = api_table
        self.node_ids = frozenset(node_ids)
        self.crash = crash
        self._rules: list[FaultRule] = []
        self._api_keys: dict[str, frozenset[int]] = {}
        self._ids = itertools.count(1)

    @property
    def rules(self) -> list[FaultRule]:
        return list(self._rules)

    def add(self, spec: FaultRule | Mapping[str, Any]) -> FaultRule:
        return self.add_all([spec])[0]

    def add_all(self, specs: Iterable[FaultRule | Mapping[str, Any]]) -> list[FaultRule]:
        """Add several rules, in order; none is added if one of them is invalid."""
        checked = check_rules(specs, self.api_table, (r.id for r in self._rules), node_ids=self.node_ids)
        if not self.crash and any(rule.action == "crash" for rule, _keys in checked):
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

    def in_force(self, rule: FaultRule) -> bool:
        """Whether ``rule`` is still one of the set's (a removed delay lets go of what it holds)."""
        return self.get(rule.id) is rule

    def firing_rule(self, node_id: int, spec: ApiSpec, ctx: RequestContext, request: Any) -> FaultRule | None:
        """The first rule in force on broker ``node_id`` that matches the request and fires for it."""
        request_targets: list[tuple[str, int | None]] | None = None
        sender = sender_of(spec, ctx, request)
        for rule in self._rules:
            if not rule.applies_on(node_id):
                continue
            if rule.scoped and request_targets is None:
                request_targets = messages.targets(request, topic_names(spec, ctx))
            if rule.matches(self._api_keys.get(rule.id, frozenset()), spec.key, ctx.client_id, request_targets, sender):
                if rule.count_and_decide(node_id):
                    return rule
        return None


class FaultInjector:
    """A broker's interceptor: applies the first rule that fires to each request. ``rules`` is
    the set it reads (a cluster's, shared); by default one of its own for this broker."""

    def __init__(self, broker: Broker, crash: CrashHook | None = None, rules: FaultRuleSet | None = None) -> None:
        self.broker = broker
        self.crash_hook = crash
        self.rule_set = rules if rules is not None else FaultRuleSet(broker.api_table, (broker.node_id,),
                                                                     crash is not None)

    # ----------------------------------------------------------------- rules (the set's)
    @property
    def rules(self) -> list[FaultRule]:
        return self.rule_set.rules

    def add(self, spec: FaultRule | Mapping[str, Any]) -> FaultRule:
        return self.rule_set.add(spec)

    def add_all(self, specs: Iterable[FaultRule | Mapping[str, Any]]) -> list[FaultRule]:
        """Add several rules, in order; none is added if one of them is invalid."""
        return self.rule_set.add_all(specs)

    def get(self, rule_id: str) -> FaultRule | None:
        return self.rule_set.get(rule_id)

    def remove(self, rule_id: str) -> bool:
        return self.rule_set.remove(rule_id)

    def clear(self) -> int:
        return self.rule_set.clear()

    # ----------------------------------------------------------------- requests

    async def dispatch(self, spec: ApiSpec, ctx: RequestContext, request: Any) -> Any:
        rule = self.rule_set.firing_rule(self.broker.node_id, spec, ctx, request) if self.rule_set.rules else None
        if rule is None:
            return await spec.handler(ctx, request)
        log.info("fault rule %s (%s) fires on %s from %r (broker %d)", rule.id, rule.action, spec.name, ctx.client_id,
                 self.broker.node_id)
        action = rule.action
        if action == "close":
            raise CloseConnection(f"fault rule {rule.id}: close before handling")
        if action == "error_before":
            return await self._error_before(rule, spec, ctx, request)
        response = await spec.handler(ctx, request)
        if action == "error_after":
            if response is not None:
                messages.rewrite_errors(response, self._selector(rule), rule.error, self._message(rule),
                                        topic_names(spec, ctx))
            return response
        if action == "delay":
            await self._pause(ctx, rule.delay_ms, while_in_force=rule)
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
                messages.rewrite_errors(response, self._selector(rule), rule.error, message, topic_names(spec, ctx))
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

    async def _pause(self, ctx: RequestContext, millis: int, until_client_leaves: bool = False,
                     while_in_force: FaultRule | None = None) -> None:
        """Sleep ``millis``, cut short when the broker is stopping (a clean stop waits for
        requests in progress), with ``until_client_leaves`` when the client has gone, and with
        ``while_in_force`` when that rule is removed (healing a slowed follower releases its fetch)."""
        deadline = time.monotonic() + millis / 1000
        conn = ctx.connection
        while (remaining := deadline - time.monotonic()) > 0:
            if not self.broker.started or conn.closed:
                return
            if while_in_force is not None and not self.rule_set.in_force(while_in_force):
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
