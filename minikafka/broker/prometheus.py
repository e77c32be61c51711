"""The broker's counters in Prometheus text format (version 0.0.4), for ``GET /metrics``.

Broker-wide numbers come from :class:`~minikafka.broker.metrics.Metrics`; the idempotence
counters (duplicates answered from the cache, out-of-order and fenced rejections, expired
producers) are per partition, from each log's producer state. Counters of a partition start
from zero when the broker restarts, as a process's counters do.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from minikafka.broker.faults import FaultInjector
    from minikafka.broker.server import Broker

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"

#: producer-state counter -> (metric name, help)
_PRODUCER_COUNTERS = {
    "duplicates": ("minikafka_producer_duplicates_total",
                   "Retried batches answered from the duplicate cache with their original offsets."),
    "out_of_order": ("minikafka_producer_out_of_order_total",
                     "Batches rejected with OUT_OF_ORDER_SEQUENCE_NUMBER."),
    "fenced": ("minikafka_producer_fenced_total", "Batches rejected with INVALID_PRODUCER_EPOCH (fenced)."),
    "expired": ("minikafka_producer_expired_total", "Producer state entries expired."),
}


def _escape(value: str) -> str:
    return value.replace("\\", "\\\\").replace("\n", "\\n").replace('"', '\\"')


def _labels(**labels: object) -> str:
    if not labels:
        return ""
    return "{" + ",".join(f'{k}="{_escape(str(v))}"' for k, v in labels.items()) + "}"


def _number(value: float) -> str:
    if isinstance(value, bool):
        return "1" if value else "0"
    if isinstance(value, int):
        return str(value)
    return repr(float(value))


class _Writer:
    def __init__(self) -> None:
        self.lines: list[str] = []

    def family(self, name: str, kind: str, help_text: str,
               samples: Iterable[tuple[str, dict[str, object], float]]) -> None:
        """One metric family: ``samples`` are (suffix, labels, value); a counter's name ends in
        ``_total`` already, a summary's samples add ``_sum`` and ``_count``."""
        self.lines.append(f"# HELP {name} {help_text}")
        self.lines.append(f"# TYPE {name} {kind}")
        for suffix, labels, value in samples:
            self.lines.append(f"{name}{suffix}{_labels(**labels)} {_number(value)}")

    def text(self) -> str:
        return "\n".join(self.lines) + "\n"


def render(broker: Broker, faults: FaultInjector | None = None) -> str:
    m = broker.metrics
    w = _Writer()
    w.family("minikafka_up", "gauge", "1 while the broker accepts connections, 0 after a stop or crash.",
             [("", {}, 1 if broker.started else 0)])
    requests = sorted(m.requests.items())
    w.family("minikafka_requests_total", "counter", "Requests answered, by Kafka API.",
             [("", {"api": api}, stats.count) for api, stats in requests])
    w.family("minikafka_request_duration_seconds", "summary",
             "Time from a request's arrival to its response being queued, by Kafka API.",
             [s for api, stats in requests
              for s in (("_sum", {"api": api}, stats.seconds), ("_count", {"api": api}, stats.count))])
    w.family("minikafka_bytes_in_total", "counter", "Request bytes received (answered requests).",
             [("", {}, m.bytes_in)])
    w.family("minikafka_bytes_out_total", "counter", "Response bytes sent.", [("", {}, m.bytes_out)])
    w.family("minikafka_connections_active", "gauge", "Open client connections.",
             [("", {}, m.connections_active)])
    w.family("minikafka_connections_total", "counter", "Client connections accepted.",
             [("", {}, m.connections_total)])
    w.family("minikafka_records_appended_total", "counter", "Records appended to partition logs.",
             [("", {}, m.records_appended)])
    w.family("minikafka_batches_appended_total", "counter", "Record batches appended to partition logs.",
             [("", {}, m.batches_appended)])
    w.family("minikafka_producer_state_snapshots_written_total", "counter",
             "Producer-state snapshot files written.", [("", {}, m.snapshots_written)])
    w.family("minikafka_recovery_seconds", "gauge", "Time the last start spent loading and recovering the logs.",
             [("", {}, m.recovery_seconds)])

    logs = broker.logs.all_logs() if broker.started and broker.logs is not None else []
    logs.sort(key=lambda plog: (plog.topic, plog.partition))
    for counter, (name, help_text) in _PRODUCER_COUNTERS.items():
        w.family(name, "counter", help_text + " Per partition.",
                 [("", {"topic": p.topic, "partition": p.partition},
                   p.producer_state.counters.get(counter, 0)) for p in logs])
    w.family("minikafka_producers_active", "gauge", "Producer ids with state, per partition.",
             [("", {"topic": p.topic, "partition": p.partition}, len(p.producer_state.producers()))
              for p in logs])
    w.family("minikafka_log_end_offset", "gauge", "Log end offset, per partition.",
             [("", {"topic": p.topic, "partition": p.partition}, p.log_end_offset) for p in logs])
    w.family("minikafka_log_start_offset", "gauge", "Log start offset, per partition.",
             [("", {"topic": p.topic, "partition": p.partition}, p.log_start_offset) for p in logs])

    rules = faults.rules if faults is not None else []
    w.family("minikafka_fault_rule_fired_total", "counter", "Times a fault rule acted on a request.",
             [("", {"rule": r.id, "action": r.action}, r.fired) for r in rules])
    w.family("minikafka_fault_rule_matched_total", "counter", "Requests a fault rule matched.",
             [("", {"rule": r.id, "action": r.action}, r.matched) for r in rules])
    return w.text()
