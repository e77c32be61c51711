"""The broker's counters for ``GET /metrics``, through ``prometheus_client``'s registry and exposition.

The broker keeps its numbers as plain attributes (:class:`~minikafka.broker.metrics.Metrics`,
each log's producer state), so the hot path pays one increment; a scrape reads them through a
custom collector. The idempotence counters (duplicates answered from the cache, out-of-order and
fenced rejections, expired producers) are per partition. Counters of a partition start from
zero when the broker restarts, as a process's counters do. prometheus_client's process and
Python collectors add ``process_*`` and ``python_*``.

Names follow Prometheus conventions: a counter is named without ``_total`` here and exposed with
it, the unit comes before ``_total`` (``minikafka_received_bytes_total``). Adding a metric is one
row in :data:`BROKER_METRICS` or :data:`PARTITION_METRICS`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Protocol

from prometheus_client import (
    CollectorRegistry,
    GCCollector,
    PlatformCollector,
    ProcessCollector,
    generate_latest,
)
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric, SummaryMetricFamily
from prometheus_client.exposition import CONTENT_TYPE_PLAIN_0_0_4

if TYPE_CHECKING:
    from minikafka.broker.server import Broker
    from minikafka.storage.log import PartitionLog

CONTENT_TYPE = CONTENT_TYPE_PLAIN_0_0_4

_FAMILIES = {"counter": CounterMetricFamily, "gauge": GaugeMetricFamily}

#: Broker-wide numbers: (name, "counter" or "gauge", help, value).
BROKER_METRICS: list[tuple[str, str, str, Callable[[Broker], float]]] = [
    ("minikafka_up", "gauge", "1 while the broker accepts connections, 0 after a stop or crash.",
     lambda b: 1 if b.started else 0),
    ("minikafka_received_bytes", "counter", "Request bytes received (answered requests).",
     lambda b: b.metrics.bytes_in),
    ("minikafka_sent_bytes", "counter", "Response bytes sent.", lambda b: b.metrics.bytes_out),
    ("minikafka_connections_active", "gauge", "Open client connections.", lambda b: b.metrics.connections_active),
    ("minikafka_connections", "counter", "Client connections accepted.", lambda b: b.metrics.connections_total),
    ("minikafka_records_appended", "counter", "Records appended to partition logs.",
     lambda b: b.metrics.records_appended),
    ("minikafka_batches_appended", "counter", "Record batches appended to partition logs.",
     lambda b: b.metrics.batches_appended),
    ("minikafka_producer_state_snapshots_written", "counter", "Producer-state snapshot files written.",
     lambda b: b.metrics.snapshots_written),
    ("minikafka_recovery_seconds", "gauge", "Time the last start spent loading and recovering the logs.",
     lambda b: b.metrics.recovery_seconds),
    # the log cleaner (minikafka.storage.cleaner); zeros when log.cleaner.enable is false
    ("minikafka_log_cleaner_read_bytes", "counter", "Bytes of segments the log cleaner read and rewrote.",
     lambda b: b.cleaner.stats.bytes_read if b.cleaner else 0),
    ("minikafka_log_cleaner_written_bytes", "counter", "Bytes of cleaned segments the log cleaner wrote.",
     lambda b: b.cleaner.stats.bytes_written if b.cleaner else 0),
    ("minikafka_log_cleaner_records_removed", "counter",
     "Records the log cleaner removed (shadowed, keyless, expired tombstones).",
     lambda b: b.cleaner.stats.records_removed if b.cleaner else 0),
    ("minikafka_log_cleaner_max_dirty_ratio", "gauge",
     "Largest dirty ratio of the compacted logs at the cleaner's last check: its backlog.",
     lambda b: b.cleaner.stats.max_dirty_ratio if b.cleaner else 0),
    ("minikafka_log_cleaner_last_run_timestamp_seconds", "gauge",
     "When the last cleaning finished, broker clock in seconds since the epoch (0 before the first).",
     lambda b: max(b.cleaner.stats.last_run_ms, 0) / 1000 if b.cleaner else 0),
    ("minikafka_log_cleaner_last_run_duration_seconds", "gauge", "How long the last cleaning took.",
     lambda b: b.cleaner.stats.last_run_seconds if b.cleaner else 0),
]

#: Per-partition numbers, labelled ``topic`` and ``partition``: (name, kind, help, value).
PARTITION_METRICS: list[tuple[str, str, str, Callable[[PartitionLog], float]]] = [
    ("minikafka_producer_duplicates", "counter",
     "Retried batches answered from the duplicate cache with their original offsets, per partition.",
     lambda p: p.producer_counters().get("duplicates", 0)),
    ("minikafka_producer_out_of_order", "counter", "Batches rejected with OUT_OF_ORDER_SEQUENCE_NUMBER, per partition.",
     lambda p: p.producer_counters().get("out_of_order", 0)),
    ("minikafka_producer_fenced", "counter", "Batches rejected with INVALID_PRODUCER_EPOCH (fenced), per partition.",
     lambda p: p.producer_counters().get("fenced", 0)),
    ("minikafka_producer_expired", "counter", "Producer state entries expired, per partition.",
     lambda p: p.producer_counters().get("expired", 0)),
    ("minikafka_producers_active", "gauge", "Producer ids with state, per partition.",
     lambda p: len(p.producers())),
    ("minikafka_log_end_offset", "gauge", "Log end offset, per partition.", lambda p: p.log_end_offset),
    ("minikafka_log_start_offset", "gauge", "Log start offset, per partition.", lambda p: p.log_start_offset),
    ("minikafka_last_stable_offset_lag", "gauge",
     "High watermark minus last stable offset: offsets read_committed consumers cannot read yet, per partition.",
     lambda p: p.high_watermark - p.last_stable_offset),
]


class Collector(Protocol):
    """prometheus_client's collector interface: what :func:`render` adds beside the broker's own."""

    def collect(self) -> Iterator[Metric]: ...


class BrokerCollector:
    """Reads one broker's numbers at scrape time."""

    def __init__(self, broker: Broker) -> None:
        self.broker = broker

    def collect(self) -> Iterator[Metric]:
        broker = self.broker
        for name, kind, help_text, read in BROKER_METRICS:
            family = _FAMILIES[kind](name, help_text)
            family.add_metric([], read(broker))
            yield family

        requests = sorted(broker.metrics.requests.items())
        answered = CounterMetricFamily("minikafka_requests", "Requests answered, by Kafka API.", labels=["api"])
        duration = SummaryMetricFamily("minikafka_request_duration_seconds",
                                       "Time from a request's arrival to its response being queued, by Kafka API.",
                                       labels=["api"])
        for api, stats in requests:
            answered.add_metric([api], stats.count)
            duration.add_metric([api], stats.count, stats.seconds)
        yield answered
        yield duration

        logs = broker.logs.all_logs() if broker.started and broker.logs is not None else []
        logs.sort(key=lambda plog: (plog.topic, plog.partition))
        for name, kind, help_text, read_partition in PARTITION_METRICS:
            family = _FAMILIES[kind](name, help_text, labels=["topic", "partition"])
            for plog in logs:
                family.add_metric([plog.topic, str(plog.partition)], read_partition(plog))
            yield family


def render(broker: Broker, *extra: Collector) -> str:
    """The Prometheus text (format 0.0.4) of ``broker``, plus the process and Python collectors and
    any ``extra`` ones (the test kit adds its fault rules' counts)."""
    registry = CollectorRegistry(auto_describe=False)
    registry.register(BrokerCollector(broker))
    for collector in extra:
        registry.register(collector)
    ProcessCollector(registry=registry)
    PlatformCollector(registry=registry)
    GCCollector(registry=registry)
    return generate_latest(registry).decode()
