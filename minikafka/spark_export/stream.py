"""``spark.readStream.format("minikafka")``: a data directory read incrementally, micro-batch by
micro-batch, as Spark's Kafka source reads a topic.

Offsets are Spark's Kafka source offsets, ``{"topic": {"0": 42, "1": 17}}`` (the next offset to
read per partition), so a checkpoint names exactly which records each micro-batch held. Each
micro-batch ``[start, end)`` is planned and read by the batch reader (the same slices, checks and
Arrow batches), so a batch replayed after a restart returns the same records, and an idempotent
sink (Spark's file sink, or ``foreachBatch`` keyed by batch id) holds every record exactly once.

* ``startingOffsets``: ``latest`` (default, as Spark's), ``earliest`` or JSON; used only when the
  query starts without a checkpoint; partitions that appear later start at their earliest offset;
* ``maxOffsetsPerTrigger``: at most this many offsets per micro-batch, shared among partitions in
  proportion to how far behind each is (Spark's rule), at least one offset of progress;
* ``isolationLevel=read_committed``: a micro-batch never goes past the last stable offset;
* ``trigger(availableNow=True)`` reads what is there when the query starts, then stops.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import replace
from typing import Any

from pyspark.sql.datasource import DataSourceStreamReader, InputPartition

from minikafka.spark_export.options import EARLIEST, OffsetLimit, ReadOptions
from minikafka.storage.disk_format import TopicPartition

try:  # Spark 4.2+: admission control (maxOffsetsPerTrigger) and Trigger.AvailableNow
    from pyspark.sql.streaming.datasource import (
        ReadAllAvailable,
        ReadMaxRows,
        SupportsTriggerAvailableNow,
    )
except ImportError:  # pragma: no cover - Spark 4.0/4.1
    ReadAllAvailable = ReadMaxRows = None  # type: ignore[assignment,misc]
    SupportsTriggerAvailableNow = object  # type: ignore[assignment,misc]

Offsets = dict[str, dict[str, int]]


def to_json_offsets(per_partition: dict[TopicPartition, int]) -> Offsets:
    out: Offsets = {}
    for (topic, partition), offset in sorted(per_partition.items()):
        out.setdefault(topic, {})[str(partition)] = offset
    return out


def from_json_offsets(offsets: Offsets) -> dict[TopicPartition, int]:
    return {(topic, int(p)): int(o) for topic, parts in offsets.items() for p, o in parts.items()}


def rate_limit(begin: dict[TopicPartition, int], end: dict[TopicPartition, int],
               limit: int) -> dict[TopicPartition, int]:
    """Ends that take at most ``limit`` offsets in all, each partition's share proportional to its
    backlog (rounded down, the rest handed out one by one in partition order)."""
    backlog = {tp: max(0, end[tp] - begin.get(tp, end[tp])) for tp in end}
    total = sum(backlog.values())
    if total <= limit:
        return dict(end)
    share = {tp: backlog[tp] * limit // total for tp in end}
    left = limit - sum(share.values())
    for tp in sorted(end):
        if left == 0:
            break
        if share[tp] < backlog[tp]:
            share[tp] += 1
            left -= 1
    return {tp: begin.get(tp, end[tp]) + share[tp] for tp in end}


class MiniKafkaStreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    def __init__(self, opts: ReadOptions) -> None:
        self.opts = opts
        self._available_now: dict[TopicPartition, int] | None = None

    # -- offsets ---------------------------------------------------------------------------------

    def _bounds(self) -> dict[TopicPartition, tuple[int, int]]:
        """(earliest, latest readable) of every selected partition, now."""
        from minikafka.spark_export.layout import list_partitions
        from minikafka.spark_export.planner import readable_bounds, select_partitions

        files = self.opts.storage.files()
        return {(p.topic, p.partition): readable_bounds(files, p, self.opts)[:2]
                for p in select_partitions(list_partitions(files), self.opts)}

    def initialOffset(self) -> Offsets:
        from minikafka.spark_export.layout import list_partitions
        from minikafka.spark_export.planner import resolve_ranges, select_partitions

        files = self.opts.storage.files()
        selected = select_partitions(list_partitions(files), self.opts)
        if self.opts.starting.kind == "latest":
            return to_json_offsets({tp: end for tp, (_, end) in self._bounds().items()})
        ranges = resolve_ranges(files, selected, replace(self.opts, ending=OffsetLimit("latest")))
        return to_json_offsets({r.tp: r.start for r in ranges})

    def getDefaultReadLimit(self) -> Any:
        if self.opts.max_offsets_per_trigger is not None and ReadMaxRows is not None:
            return ReadMaxRows(self.opts.max_offsets_per_trigger)
        return ReadAllAvailable()

    def latestOffset(self, start: Offsets | None = None, limit: Any = None) -> Offsets:
        """The end of the next micro-batch. Spark 4.0/4.1 call it without arguments (no admission
        control): then it is simply the latest readable offset of every partition."""
        begin = from_json_offsets(start or {})
        bounds = self._bounds()
        end = dict(begin)  # partitions no longer listed keep their position
        for tp, (earliest, latest) in bounds.items():
            if self._available_now is not None:
                latest = min(latest, self._available_now.get(tp, earliest))
            end[tp] = max(latest, begin.get(tp, earliest))
            begin.setdefault(tp, earliest)  # a new partition is read from its earliest offset
        if ReadMaxRows is not None and isinstance(limit, ReadMaxRows):
            end = rate_limit(begin, end, limit.max_rows)
        return to_json_offsets(end)

    def reportLatestOffset(self) -> Offsets:
        return to_json_offsets({tp: latest for tp, (_, latest) in self._bounds().items()})

    def prepareForTriggerAvailableNow(self) -> None:
        self._available_now = {tp: latest for tp, (_, latest) in self._bounds().items()}

    # -- reading ---------------------------------------------------------------------------------

    def partitions(self, start: Offsets, end: Offsets) -> list[InputPartition]:
        from minikafka.spark_export.files import Files
        from minikafka.spark_export.layout import list_partitions
        from minikafka.spark_export.planner import plan_partitions, resolve_ranges
        from minikafka.spark_export.source import SlicePartition

        begin, stop = from_json_offsets(start), from_json_offsets(end)
        # a partition that is not in ``start`` appeared since the last micro-batch: from its earliest
        wanted = {tp: (begin.get(tp, EARLIEST), e) for tp, e in stop.items() if begin.get(tp, EARLIEST) < e}
        if not wanted:
            return []
        files: Files = self.opts.storage.files()
        pdirs = [p for p in list_partitions(files) if (p.topic, p.partition) in wanted]
        opts = replace(self.opts, subscribe=None, subscribe_pattern=None, assign=tuple(sorted(wanted)),
                       starting=OffsetLimit("offsets", per_partition={tp: s for tp, (s, _) in wanted.items()}),
                       ending=OffsetLimit("offsets", per_partition={tp: e for tp, (_, e) in wanted.items()}))
        return [SlicePartition(part) for part in plan_partitions(files, resolve_ranges(files, pdirs, opts), opts)]

    def read(self, partition: InputPartition) -> Iterator[Any]:
        from minikafka.spark_export.source import read_slice

        yield from read_slice(self.opts, partition)

    def commit(self, end: Offsets) -> None:
        """Nothing to release: segment files stay where they are until retention removes them."""
