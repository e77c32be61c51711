"""minikafka for its users' tests: a broker on a thread, fault rules, lifecycle and admin helpers.

::

    from minikafka.testkit import MiniKafka

    with MiniKafka() as kafka:                          # free port, temporary data dir
        kafka.create_topic("orders", partitions=3)
        rule = kafka.faults.drop_response(api="Produce", topic="orders")
        ...  # run the code under test against kafka.bootstrap
        assert rule.fired == 1
        kafka.restart(clean=False)                      # crash and recover, same port

The broker runs on its own event-loop thread, so the object works the same from synchronous
tests, from asyncio tests, and with any client library. The pytest fixtures in
:mod:`minikafka.testkit.pytest_plugin` hand out these objects.
"""

from __future__ import annotations

import os
import shutil
import tempfile
import uuid
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any, NamedTuple, Self

from minikafka.broker.embedded import BrokerThread
from minikafka.storage.batch import split_batches


class Record(NamedTuple):
    offset: int
    key: bytes | None
    value: bytes | None
    headers: list[tuple[str, bytes]]
    timestamp: int
    producer_id: int
    base_sequence: int


class Faults:
    """Fault rules of one broker, or of a cluster. Each method adds a rule and returns it; the
    returned :class:`~minikafka.testkit.faults.FaultRule` is live — ``rule.fired`` and
    ``rule.matched`` count as requests arrive (``rule.by_broker`` per broker).

    Every method takes the match keywords ``api`` (name like ``"Produce"`` or key, or a list),
    ``topic`` (name or glob), ``partition``, ``client_id`` (name or glob), in a cluster
    ``broker`` (the node ids it is in force on) and ``from_broker`` (requests sent by brokers:
    node ids, or True/False), and the trigger keywords ``trigger`` (``once`` — the default —,
    ``next``, ``every``, ``nth``, ``always``) with ``n``, and ``id``.

    ``call`` runs a function on the brokers' event loop; ``rule_set`` gives the rules' holder
    there (a :class:`~minikafka.testkit.faults.FaultInjector` or ``FaultRuleSet``).
    """

    def __init__(self, call: Callable[[Callable[[], Any]], Any], rule_set: Callable[[], Any]) -> None:
        self._call = call
        self._rule_set = rule_set

    def add(self, action: str, **spec: Any) -> Any:
        rule_spec = {"action": action, **{k: v for k, v in spec.items() if v is not None}}
        return self._call(lambda: self._rule_set().add(rule_spec))

    def add_all(self, specs: Iterable[Mapping[str, Any]]) -> list[Any]:
        specs = [dict(s) for s in specs]
        return self._call(lambda: self._rule_set().add_all(specs))

    def error_before(self, error: int | str = "NOT_LEADER_OR_FOLLOWER", **match: Any) -> Any:
        """Answer matching partitions with ``error`` without appending."""
        return self.add("error_before", error=error, **match)

    def error_after(self, error: int | str = "NOT_LEADER_OR_FOLLOWER", **match: Any) -> Any:
        """Append, then answer matching partitions with ``error``."""
        return self.add("error_after", error=error, **match)

    def drop_response(self, mode: str = "close", hold_ms: int | None = None, **match: Any) -> Any:
        """Append, then never answer: close the connection, or hold until the client gives up."""
        return self.add("drop_response", mode=mode, hold_ms=hold_ms, **match)

    def delay(self, delay_ms: int, **match: Any) -> Any:
        """Handle, then answer ``delay_ms`` later."""
        return self.add("delay", delay_ms=delay_ms, **match)

    def close_connection(self, **match: Any) -> Any:
        """Close the connection before handling."""
        return self.add("close", **match)

    def crash(self, restart_after_ms: int | None = None, **match: Any) -> Any:
        """Handle, then crash the broker before answering (and restart after ``restart_after_ms``)."""
        return self.add("crash", restart_after_ms=restart_after_ms, **match)

    @property
    def rules(self) -> list[Any]:
        return self._call(lambda: self._rule_set().rules)

    def remove(self, rule: Any) -> bool:
        rule_id = rule if isinstance(rule, str) else rule.id
        return self._call(lambda: self._rule_set().remove(rule_id))

    def clear(self) -> int:
        return self._call(lambda: self._rule_set().clear())


#: a RAM filesystem is used for scratch data dirs only if it has this much room
_MIN_RAM_DIR_BYTES = 1 << 30


def scratch_dir(in_memory: bool = True) -> Path:
    """A fresh temporary data dir, on a RAM filesystem (``/dev/shm``) when one with room is there.

    A broker's first start writes and fsyncs a handful of small files (metadata, the internal
    offsets topic, checkpoints); on a disk those fsyncs are most of a test broker's start-up
    time, on a RAM filesystem they cost nothing. A test's data needs no durability beyond the
    process: a simulated crash keeps the page cache.
    """
    if in_memory:
        ram = Path("/dev/shm")
        try:
            stat = os.statvfs(ram)
            if os.access(ram, os.W_OK) and stat.f_bavail * stat.f_frsize >= _MIN_RAM_DIR_BYTES:
                return Path(tempfile.mkdtemp(prefix="minikafka-", dir=ram))
        except OSError:
            pass
    return Path(tempfile.mkdtemp(prefix="minikafka-"))


class OnAThread:
    """What :class:`MiniKafka` and :class:`~minikafka.testkit.in_process_cluster.MiniKafkaCluster`
    share: the thread their brokers run on (``_thread``, with ``call`` and ``stop``), the admin
    endpoint they may serve, and a scratch data dir removed when they stop."""

    _thread: Any
    _admin: Any = None
    _thread_running: bool = False
    _own_dir: bool
    data_dir: Path

    def start(self) -> Self:
        raise NotImplementedError

    def stop(self) -> None:
        """Stop the brokers (cleanly, if they run) and remove a temporary data dir."""
        if self._admin is not None:
            try:
                self._thread.call(self._admin.stop)
            finally:
                self._admin = None
        if self._thread_running:
            self._thread_running = False
            self._thread.stop()
        self._remove_own_dir()

    def _remove_own_dir(self) -> None:
        if self._own_dir:
            shutil.rmtree(self.data_dir, ignore_errors=True)

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    @property
    def admin_url(self) -> str | None:
        """``http://host:port`` of the admin endpoint (only with ``admin_port``)."""
        return self._admin.url if self._admin is not None else None


class MiniKafka(OnAThread):
    """A broker for tests on a free port (or ``port``), over ``data_dir`` (by default a fresh
    temporary directory — on a RAM filesystem unless ``in_memory=False`` — removed at :meth:`stop`).

    ``config`` holds broker settings under Kafka's names; ``faults`` rule specs to install
    before the first client connects; ``admin_port`` (0 = free port) starts the HTTP admin
    endpoint as ``minikafka serve --admin-port`` does.
    """

    def __init__(
        self,
        data_dir: str | Path | None = None,
        port: int = 0,
        host: str = "127.0.0.1",
        config: Mapping[str, Any] | None = None,
        faults: Iterable[Mapping[str, Any]] | None = None,
        admin_port: int | None = None,
        in_memory: bool = True,
        **broker_kwargs: Any,
    ) -> None:
        self._own_dir = data_dir is None
        self.data_dir = scratch_dir(in_memory) if data_dir is None else Path(data_dir)
        try:  # the settings are checked here: a refused one leaves no scratch dir behind
            self._thread = BrokerThread(data_dir=str(self.data_dir), port=port, host=host,
                                        config=dict(config or {}), **broker_kwargs)
        except BaseException:
            self._remove_own_dir()
            raise
        self._initial_faults = [dict(f) for f in faults or []]
        self._admin_port = admin_port
        self._control: Any = None
        self.faults = Faults(self._call, lambda: self._control.faults)

    # ----------------------------------------------------------------- lifecycle
    def start(self) -> MiniKafka:
        from minikafka.testkit.control import BrokerControl

        try:
            self._thread.start()
            self._thread_running = True
            broker = self._thread.broker
            assert broker is not None  # the thread's start returns once its broker is up
            self._control = self._call(lambda: BrokerControl(broker))
            if self._initial_faults:
                self.faults.add_all(self._initial_faults)
            if self._admin_port is not None:
                from minikafka.testkit.admin_http import AdminServer

                admin = AdminServer(self._control, self._thread.broker_config.host, self._admin_port)
                self._admin = self._thread.call(admin.start)
        except BaseException:
            self.stop()
            raise
        return self

    def crash(self) -> None:
        """Stop as a crash would: connections dropped; nothing flushed, snapshotted or marked clean."""
        self._thread.call(self._control.crash)

    def start_again(self) -> None:
        """Start after :meth:`crash` on the same port and data dir (recovering the logs)."""
        self._thread.call(self._control.start)

    def restart(self, clean: bool = True) -> None:
        """Stop (cleanly, or as a crash with ``clean=False``) and start on the same port and data dir."""
        self._thread.call(self._control.restart, clean)

    @property
    def running(self) -> bool:
        return bool(self._control is not None and self._control.running)

    # ----------------------------------------------------------------- addresses
    @property
    def bootstrap(self) -> str:
        """``host:port`` for ``bootstrap.servers`` / ``bootstrap_servers``."""
        return self._thread.bootstrap

    @property
    def host(self) -> str:
        return self._thread.bootstrap.rpartition(":")[0]

    @property
    def port(self) -> int:
        return self._thread.port

    # ----------------------------------------------------------------- storage and admin
    def roll_segment(self, topic: str | None = None, partition: int | None = None) -> list[str]:
        """Start a new segment now (writes a producer-state snapshot); returns what rolled."""
        return self._call(lambda: self._control.roll_segments(topic, partition))

    def clean_logs(self, roll: bool = False, topic: str | None = None,
                   partition: int | None = None) -> dict[str, list[Any]]:
        """Run the log cleaner now, until no compacted partition qualifies (by its topic's
        ``min.cleanable.dirty.ratio`` and compaction lags); the active segment is never cleaned,
        so ``roll=True`` first starts a new segment in the matching partitions (all by default).
        Returns ``{"rolled": [...], "cleaned": [{"topic", "partition", "records_removed",
        "bytes_read", "bytes_written", "clean_up_to"}, ...]}``."""
        return self._call(lambda: self._control.clean_logs(roll, topic, partition))

    def expire_producers(self, topic: str | None = None, partition: int | None = None) -> int:
        """Forget producer state now, as if ``producer.id.expiration.ms`` had passed."""
        return self._call(lambda: self._control.expire_producers(topic, partition))

    def create_topic(self, name: str, partitions: int | None = None, config: Mapping[str, Any] | None = None) -> str:
        """Create a topic; ``partitions`` defaults to the broker's ``num.partitions``."""
        self._call(lambda: self._control.create_topic(name, partitions, dict(config or {})))
        return name

    def new_topic(self, partitions: int | None = None, config: Mapping[str, Any] | None = None, prefix: str = "test") -> str:
        """Create a topic with a fresh unique name (handy with a broker shared by many tests)."""
        return self.create_topic(f"{prefix}-{uuid.uuid4().hex[:12]}", partitions, config)

    def delete_topic(self, name: str) -> None:
        self._call(lambda: self._control.delete_topic(name))

    def topics(self, internal: bool = False) -> dict[str, int]:
        """Topic name -> partition count (Kafka's internal topics only with ``internal``)."""
        return self._call(lambda: self._control.topics(internal))

    def partition_state(self, topic: str, partition: int = 0) -> dict[str, Any]:
        """Offsets (the last stable offset too), segments, producer-state entries (with their open
        transaction's first offset) and idempotence counters of one partition."""
        return self._call(lambda: self._control.partition_state(topic, partition))

    def records(self, topic: str, partition: int = 0) -> list[Record]:
        """Every record in the partition's log, read from the files' batches (not a consumer)."""
        from kafka.record import MemoryRecords

        data = self._call(lambda: self._read_log(topic, partition))
        out: list[Record] = []
        records = MemoryRecords(data)
        while records.has_next():
            batch = records.next_batch()
            if batch is None:
                break
            for rec in batch:
                out.append(Record(rec.offset, rec.key, rec.value, list(rec.headers), rec.timestamp,
                                  batch.producer_id, batch.base_sequence))
        return out

    def _read_log(self, topic: str, partition: int) -> bytes:
        logs = self._thread.broker.logs if self._thread.broker is not None else None
        plog = logs.get_log(topic, partition) if logs is not None else None
        if plog is None:
            raise KeyError(f"no partition {topic}-{partition}")
        chunks = []
        offset = plog.log_start_offset
        while offset < plog.log_end_offset:
            data = bytes(plog.read(offset, 1 << 20))
            if not data:
                break
            batches = split_batches(data)
            if not batches:
                raise ValueError(f"no complete batch at offset {offset} of {topic}-{partition}")
            chunks.append(data)
            offset = batches[-1][1].next_offset
        return b"".join(chunks)

    def metrics(self) -> str:
        """The Prometheus text ``GET /metrics`` would answer."""
        return self._call(self._control.metrics_text)

    def _call(self, fn: Any) -> Any:
        return self._thread.call(fn)
