"""Lifecycle and admin operations on a running broker, for tests and the admin endpoint.

:class:`BrokerControl` owns a broker's :class:`~minikafka.testkit.faults.FaultInjector` and
adds what no Kafka API offers: crash the broker (stop without flush, snapshot or
clean-shutdown marker) and start it again from the same data directory on the same port, roll
a segment now, expire producers now, run the log cleaner now. Every method runs on the broker's event loop.

A restart reuses the same :class:`Broker` object, so the bootstrap address, the metrics, the
fault rules and their counters all carry over; the logs are recovered from disk as after a
real restart.
"""

from __future__ import annotations

import asyncio
import fnmatch
import logging
import time
from typing import TYPE_CHECKING, Any

from minikafka.broker.topics import is_internal
from minikafka.testkit.faults import FaultInjector, FaultRuleCollector

if TYPE_CHECKING:
    from minikafka.broker.server import Broker
    from minikafka.storage.log import PartitionLog

log = logging.getLogger(__name__)

#: the clock value that makes every producer look idle for longer than any expiration time
_FAR_FUTURE_MS = 1 << 62


class BrokerControl:
    def __init__(self, broker: Broker) -> None:
        self.broker = broker
        self.faults = FaultInjector(broker, crash=self.crash_and_restart)
        broker.interceptor = self.faults
        self.crashes = 0
        self.restarts = 0
        self._lifecycle = asyncio.Lock()

    # ----------------------------------------------------------------- lifecycle
    @property
    def running(self) -> bool:
        return self.broker.started

    async def crash(self) -> None:
        """Stop as a crash would: connections dropped, nothing flushed, snapshotted or marked clean."""
        async with self._lifecycle:
            await self._stop(clean=False)

    async def stop(self) -> None:
        async with self._lifecycle:
            await self._stop(clean=True)

    async def start(self) -> None:
        """Start again (after :meth:`crash` or :meth:`stop`) on the same port and data dir."""
        async with self._lifecycle:
            await self._start()

    async def restart(self, clean: bool = True) -> None:
        """Stop (cleanly, or as a crash) and start again on the same port and data dir."""
        async with self._lifecycle:
            await self._stop(clean=clean)
            await self._start()

    async def crash_and_restart(self, restart_after_ms: int | None) -> None:
        """The ``crash`` fault action: crash now; start again after ``restart_after_ms`` if given."""
        await self.crash()
        if restart_after_ms is not None:
            await asyncio.sleep(restart_after_ms / 1000)
            await self.start()

    async def _stop(self, clean: bool) -> None:
        broker = self.broker
        if not broker.started:
            return
        broker.config.port = broker.port  # come back on the same port, even if it was picked (0)
        await broker.stop(clean=clean)
        if not clean:
            self.crashes += 1
        log.info("broker %s (%s)", "stopped" if clean else "crashed", broker.bootstrap)

    async def _start(self) -> None:
        broker = self.broker
        if broker.started:
            return
        started = time.perf_counter()
        # The port was just released by this process; a client's reconnect may race the bind.
        for attempt in range(50):
            try:
                await broker.start()
                break
            except OSError:
                if attempt == 49:
                    raise
                await asyncio.sleep(0.02)
        self.restarts += 1
        log.info("broker started again on %s in %.1f ms (recovery %.1f ms)", broker.bootstrap,
                 (time.perf_counter() - started) * 1000, broker.metrics.recovery_seconds * 1000)

    def metrics_text(self) -> str:
        """The Prometheus text of ``GET /metrics``: the broker's numbers and the fault rules' counts."""
        from minikafka.broker import prometheus  # prometheus_client: only when someone scrapes

        return prometheus.render(self.broker, FaultRuleCollector(self.faults))

    # ----------------------------------------------------------------- storage
    def _logs(self, topic: str | None, partition: int | None) -> list[PartitionLog]:
        logs = self.broker.logs
        if logs is None or not self.broker.started:
            raise RuntimeError("the broker is not running")
        return [plog for plog in logs.all_logs()
                if (topic is None or fnmatch.fnmatchcase(plog.topic, topic))
                and (partition is None or plog.partition == partition)]

    def roll_segments(self, topic: str | None = None, partition: int | None = None) -> list[str]:
        """Start a new segment now in the matching partitions (all by default); returns the names
        of those that rolled (a partition whose active segment is empty does not roll)."""
        rolled = []
        for plog in self._named_logs(topic, partition):
            before = len(plog.segment_base_offsets())
            plog.roll()
            if len(plog.segment_base_offsets()) > before:
                rolled.append(plog.name)
        return rolled

    def expire_producers(self, topic: str | None = None, partition: int | None = None) -> int:
        """Forget every producer (outside a transaction) of the matching partitions now, as if
        ``producer.id.expiration.ms`` had passed; returns how many entries went."""
        return sum(plog.expire_producers(_FAR_FUTURE_MS) for plog in self._named_logs(topic, partition))

    async def clean_logs(self, roll: bool = False, topic: str | None = None,
                         partition: int | None = None) -> dict[str, list[Any]]:
        """Run the log cleaner now until no compacted log qualifies, as it runs every
        ``log.cleaner.backoff.ms``; with ``roll``, first start a new segment in the matching
        partitions (``topic``/``partition`` as :meth:`roll_segments`), since the active segment
        is never cleaned. Returns what rolled and what each cleaning did."""
        if self.broker.cleaner is None:
            raise RuntimeError("the log cleaner is off (log.cleaner.enable=false)")
        if not roll and (topic is not None or partition is not None):
            raise ValueError("topic and partition choose what rolls: give them with roll")
        rolled = self.roll_segments(topic, partition) if roll else []
        cleaned = await self.broker.clean_logs()
        return {
            "rolled": rolled,
            "cleaned": [{"topic": plog.topic, "partition": plog.partition, "records_removed": result.records_removed,
                         "bytes_read": result.bytes_read, "bytes_written": result.bytes_written,
                         "clean_up_to": result.map_end}
                        for plog, result in cleaned],
        }

    def _named_logs(self, topic: str | None, partition: int | None) -> list[PartitionLog]:
        """The matching partitions; KeyError when a topic or partition was named and none matches
        (a typo must not look like "nothing to do")."""
        plogs = self._logs(topic, partition)
        if not plogs and (topic is not None or partition is not None):
            raise KeyError(f"no partition matches topic {topic or '*'}, partition "
                           f"{'*' if partition is None else partition}")
        return plogs

    def create_topic(self, name: str, partitions: int | None = None, config: dict[str, Any] | None = None) -> None:
        """Create a topic; ``partitions`` defaults to the broker's ``num.partitions``, as CreateTopics does."""
        logs = self.broker.logs
        if logs is None or not self.broker.started:
            raise RuntimeError("the broker is not running")
        if partitions is None:
            partitions = int(self.broker.config.get("num.partitions"))
        logs.create_topic(name, partitions, {k: str(v) for k, v in (config or {}).items()})

    def delete_topic(self, name: str) -> None:
        logs = self.broker.logs
        if logs is None or not self.broker.started:
            raise RuntimeError("the broker is not running")
        logs.delete_topic(name)

    def topics(self, internal: bool = False) -> dict[str, int]:
        """Topic name -> partition count (Kafka's internal topics only with ``internal``)."""
        logs = self.broker.logs
        if logs is None or not self.broker.started:
            return {}
        return {name: info.partitions for name, info in sorted(logs.topics().items())
                if internal or not is_internal(name)}

    def partition_state(self, topic: str, partition: int) -> dict[str, Any]:
        """Offsets and producer state of one partition (what a test wants to assert on)."""
        plogs = [p for p in self._logs(None, partition) if p.topic == topic]
        if not plogs:
            raise KeyError(f"no partition {topic}-{partition}")
        plog = plogs[0]
        return {
            "topic": topic,
            "partition": partition,
            "log_start_offset": plog.log_start_offset,
            "log_end_offset": plog.log_end_offset,
            "high_watermark": plog.high_watermark,
            "last_stable_offset": plog.last_stable_offset,
            "segments": plog.segment_base_offsets(),
            "counters": dict(plog.producer_counters()),
            "producers": {
                pid: {"epoch": entry.epoch, "last_sequence": entry.last_seq, "last_offset": entry.last_offset,
                      "batches": len(entry.batches), "current_txn_first_offset": entry.current_txn_first_offset,
                      "coordinator_epoch": entry.coordinator_epoch}
                for pid, entry in plog.producers().items()
            },
        }

    def transactions(self) -> list[dict[str, Any]]:
        """Every transactional id the coordinator knows, with its state (empty when not running)."""
        return transactions_of(self.broker)

    def status(self) -> dict[str, Any]:
        broker = self.broker
        return {
            "running": broker.started,
            "bootstrap": broker.bootstrap,
            "node_id": broker.node_id,
            "data_dir": str(broker.data_dir),
            "topics": self.topics(),
            "crashes": self.crashes,
            "restarts": self.restarts,
            "rules": len(self.faults.rules),
        }


def transactions_of(broker: Broker) -> list[dict[str, Any]]:
    """Every transactional id the broker's coordinator knows, with its state (empty when not running)."""
    coordinator = broker.transactions
    if coordinator is None or not coordinator.active:
        return []
    return [
        {"transactional_id": m.transactional_id, "state": m.state.display, "producer_id": m.producer_id,
         "producer_epoch": m.producer_epoch, "timeout_ms": m.timeout_ms, "start_ms": m.start_ms,
         "last_update_ms": m.last_update_ms, "partitions": [f"{t}-{p}" for t, p in sorted(m.partitions)],
         "kafka_partition": coordinator.kafka_partition(m.transactional_id)}
        for m in sorted(coordinator.txns.values(), key=lambda m: m.transactional_id)
    ]
