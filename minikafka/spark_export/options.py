"""The reader's options: Spark's Kafka source option names, values and checks, plus a few extras.

Option names are case-insensitive, as Spark's are. Which topics to read:

* ``subscribe`` — comma-separated topic names;
* ``subscribePattern`` — a regular expression a whole topic name must match;
* ``assign`` — JSON ``{"topicA":[0,1],"topicB":[2]}``;
* none of them (an extension; Spark requires one) — every topic except internal ones.

Only one of the three may be given. Where to start and stop (precedence as in Spark: a global
timestamp, then per-partition timestamps, then offsets):

* ``startingOffsets`` — ``earliest`` (default) or JSON ``{"t":{"0":23,"1":-2}}`` (-2 = earliest);
  ``latest`` is refused for a batch read, as Spark refuses it;
* ``endingOffsets`` — ``latest`` (default) or JSON (-1 = latest); ``earliest`` is refused;
* ``startingTimestamp`` / ``endingTimestamp`` — milliseconds since the epoch, every partition;
* ``startingOffsetsByTimestamp`` / ``endingOffsetsByTimestamp`` — JSON ``{"t":{"0":1700000000000}}``;
* ``startingOffsetsByTimestampStrategy`` — ``error`` (default) or ``latest``, when no record is at
  or after a starting timestamp.

Others: ``failOnDataLoss`` (default true), ``minPartitions``, ``maxRecordsPerPartition``,
``includeHeaders``, and the extensions ``includeProducerFields`` (producerId, producerEpoch,
sequence, isTransactional) and ``maxBytesPerPartition`` (default 1 GiB: the segments of a
partition are packed into input partitions of at most this many bytes, and a larger segment is
split at offset-index entries; see :mod:`.planner`).

Any other name is refused, with the names it is close to: a misspelt ``subscribe`` would otherwise
read every topic. Accepted without effect, so that a query written for Spark's Kafka source runs
unchanged: that source's consumer settings (``kafka.*`` other than ``kafka.isolation.level``, which
is honoured, and :data:`IGNORED`), which a read of files has no use for.
"""

from __future__ import annotations

import difflib
import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from minikafka.spark_export.errors import ExportOptionError
from minikafka.spark_export.files import S3_OPTIONS, Storage
from minikafka.storage.disk_format import TopicPartition

EARLIEST = -2
LATEST = -1
DEFAULT_MAX_BYTES_PER_PARTITION = 1 << 30


#: The options the reader honours, as documented: Spark's Kafka source names, the extensions, and
#: ``path``, which Spark sets from ``load(path)``. The S3 connection options are added below.
OPTIONS = (
    "subscribe", "subscribePattern", "assign",
    "startingOffsets", "endingOffsets", "startingTimestamp", "endingTimestamp",
    "startingOffsetsByTimestamp", "endingOffsetsByTimestamp", "startingOffsetsByTimestampStrategy",
    "failOnDataLoss", "minPartitions", "maxRecordsPerPartition", "maxOffsetsPerTrigger", "includeHeaders",
    "includeProducerFields", "maxBytesPerPartition", "isolationLevel", "kafka.isolation.level", "path",
)
#: Spark's Kafka source options that tune its consumer and the broker round trips a read of files
#: does not make: accepted and ignored, like every other ``kafka.*`` consumer setting.
IGNORED = ("kafkaConsumer.pollTimeoutMs", "fetchOffset.numRetries", "fetchOffset.retryIntervalMs", "groupIdPrefix")
#: Names Spark's Kafka source (or Spark itself) takes that this reader refuses, and why.
UNSUPPORTED = {
    "minoffsetspertrigger": "minOffsetsPerTrigger is not supported: every trigger reads what is there, up to "
                            "maxOffsetsPerTrigger",
    "maxtriggerdelay": "maxTriggerDelay is not supported (it goes with minOffsetsPerTrigger, which is not)",
    "paths": "the minikafka source reads one data directory: load() takes one path",
}
_KNOWN = {name.lower(): name for name in (*OPTIONS, *IGNORED, *S3_OPTIONS)}


def check_option_names(options: Mapping[str, str]) -> None:
    """Refuse names the reader does not know (keys in lower case, as Spark passes them), each
    with the known names it is close to."""
    for key in options:
        if key in UNSUPPORTED:
            raise ExportOptionError(UNSUPPORTED[key])
    unknown = sorted(k for k in options if k not in _KNOWN and not k.startswith("kafka."))
    if not unknown:
        return
    described = []
    for key in unknown:
        close = [_KNOWN[c] for c in difflib.get_close_matches(key, _KNOWN, n=3, cutoff=0.75)]
        described.append(f"{key!r} (did you mean {' or '.join(close)}?)" if close else repr(key))
    raise ExportOptionError(f"unknown option{'s' if len(unknown) > 1 else ''} for the minikafka source: "
                            f"{', '.join(described)}; its options are listed in docs/spark.md#options")


@dataclass(frozen=True, slots=True)
class OffsetLimit:
    """One end of the range to read.

    ``kind`` is ``earliest``, ``latest``, ``offsets`` (``per_partition`` holds offsets, with -2/-1
    for earliest/latest), ``timestamp`` (``timestamp`` for every partition) or ``timestamps``
    (``per_partition`` holds timestamps).
    """

    kind: str
    per_partition: dict[TopicPartition, int] | None = None
    timestamp: int | None = None


@dataclass(frozen=True, slots=True)
class ReadOptions:
    path: str
    storage: Storage
    subscribe: tuple[str, ...] | None
    subscribe_pattern: str | None
    assign: tuple[TopicPartition, ...] | None
    starting: OffsetLimit
    ending: OffsetLimit
    no_match_latest: bool
    fail_on_data_loss: bool
    min_partitions: int | None
    max_records_per_partition: int | None
    max_bytes_per_partition: int
    include_headers: bool
    include_producer_fields: bool
    #: Streaming only: at most this many offsets per micro-batch, over all partitions.
    max_offsets_per_trigger: int | None = None
    #: ``read_committed``: no records of aborted transactions, nothing from the first open one on.
    read_committed: bool = False


def _bool(options: Mapping[str, str], name: str, default: bool) -> bool:
    value = options.get(name.lower())
    if value is None:
        return default
    text = str(value).strip().lower()
    if text not in ("true", "false"):
        raise ExportOptionError(f"option {name} must be 'true' or 'false', got {value!r}")
    return text == "true"


def _positive(options: Mapping[str, str], name: str, default: int | None) -> int | None:
    value = options.get(name.lower())
    if value is None:
        return default
    try:
        number = int(str(value).strip())
    except ValueError:
        raise ExportOptionError(f"option {name} must be an integer, got {value!r}") from None
    if number <= 0:
        raise ExportOptionError(f"{name} must be positive")
    return number


def _json(value: str, example: str) -> Any:
    try:
        return json.loads(value)
    except json.JSONDecodeError:
        raise ExportOptionError(f"Expected e.g. {example}, got {value}") from None


def parse_assign(value: str) -> tuple[TopicPartition, ...]:
    example = '{"topicA":[0,1],"topicB":[0,1]}'
    if not value.strip().startswith("{"):
        raise ExportOptionError(f"No topicpartitions to assign as specified value for option 'assign' is '{value}'")
    parsed = _json(value, example)
    if not isinstance(parsed, dict):
        raise ExportOptionError(f"Expected e.g. {example}, got {value}")
    out: list[TopicPartition] = []
    for topic, parts in parsed.items():
        if not isinstance(parts, list) or not all(isinstance(p, int) and not isinstance(p, bool) for p in parts):
            raise ExportOptionError(f"Expected e.g. {example}, got {value}")
        out.extend((topic, p) for p in parts)
    return tuple(out)


def parse_partition_numbers(value: str, what: str) -> dict[TopicPartition, int]:
    """``{"topicA":{"0":23,"1":-1}}`` -> ``{("topicA", 0): 23, ("topicA", 1): -1}``."""
    example = '{"topicA":{"0":23,"1":-1},"topicB":{"0":-2}}'
    parsed = _json(value, example)
    if not isinstance(parsed, dict):
        raise ExportOptionError(f"Expected e.g. {example} for {what}, got {value}")
    out: dict[TopicPartition, int] = {}
    for topic, parts in parsed.items():
        if not isinstance(parts, dict):
            raise ExportOptionError(f"Expected e.g. {example} for {what}, got {value}")
        for part, number in parts.items():
            if not isinstance(number, int) or isinstance(number, bool):
                raise ExportOptionError(f"Expected e.g. {example} for {what}, got {value}")
            try:
                out[(topic, int(part))] = number
            except ValueError:
                raise ExportOptionError(f"Expected e.g. {example} for {what}, got {value}") from None
    return out


def _limit(options: Mapping[str, str], prefix: str, default: str) -> OffsetLimit:
    """``prefix`` is ``starting`` or ``ending``: Spark's precedence over the three option forms."""
    global_ts = options.get(f"{prefix}timestamp")
    if global_ts is not None:
        try:
            return OffsetLimit("timestamp", timestamp=int(str(global_ts).strip()))
        except ValueError:
            raise ExportOptionError(f"Expected a single long value, got {global_ts}") from None
    by_ts = options.get(f"{prefix}offsetsbytimestamp")
    if by_ts is not None:
        return OffsetLimit("timestamps", per_partition=parse_partition_numbers(by_ts, f"{prefix}OffsetsByTimestamp"))
    value = options.get(f"{prefix}offsets")
    if value is None:
        return OffsetLimit(default)
    text = str(value).strip()
    if text.lower() in ("earliest", "latest"):
        return OffsetLimit(text.lower())
    return OffsetLimit("offsets", per_partition=parse_partition_numbers(text, f"{prefix}Offsets"))


def _check_batch_limits(starting: OffsetLimit, ending: OffsetLimit) -> None:
    if starting.kind == "latest":
        raise ExportOptionError("starting offset can't be latest for batch queries")
    if starting.kind == "offsets":
        for (topic, part), off in (starting.per_partition or {}).items():
            if off == LATEST:
                raise ExportOptionError(f"startingOffsets for {topic}-{part} can't be latest for batch queries")
            if off < EARLIEST:
                raise ExportOptionError(f"startingOffsets for {topic}-{part} is negative: {off}")
    if ending.kind == "earliest":
        raise ExportOptionError("ending offset can't be earliest for batch queries")
    if ending.kind == "offsets":
        for (topic, part), off in (ending.per_partition or {}).items():
            if off == EARLIEST:
                raise ExportOptionError(f"ending offset for {topic}-{part} can't be earliest for batch queries")
            if off < LATEST:
                raise ExportOptionError(f"endingOffsets for {topic}-{part} is negative: {off}")
    if starting.kind == ending.kind and starting.kind in ("offsets", "timestamps"):
        start, end = starting.per_partition or {}, ending.per_partition or {}
        if start.keys() != end.keys():
            raise ExportOptionError(
                f"starting and ending offsets name different partitions: {sorted(start)} vs {sorted(end)}"
            )
        for tp, s in start.items():
            e = end[tp]
            if s >= 0 and e >= 0 and s > e:
                raise ExportOptionError(f"starting offset {s} is greater than ending offset {e} for {tp[0]}-{tp[1]}")


def column_options(raw: Mapping[str, Any]) -> tuple[bool, bool]:
    """(includeHeaders, includeProducerFields): all the schema depends on."""
    options = {str(k).lower(): str(v) for k, v in raw.items() if v is not None}
    return _bool(options, "includeHeaders", False), _bool(options, "includeProducerFields", False)


ISOLATION_LEVELS = ("read_uncommitted", "read_committed")


def _isolation_level(options: Mapping[str, str]) -> str:
    """``isolationLevel``, or Spark's Kafka source's way to say it, ``kafka.isolation.level``."""
    given = {name: options[name.lower()].strip().lower() for name in ("isolationLevel", "kafka.isolation.level")
             if name.lower() in options}
    for name, value in given.items():
        if value not in ISOLATION_LEVELS:
            raise ExportOptionError(f"{name} must be 'read_uncommitted' or 'read_committed', got {value!r}")
    if len(set(given.values())) > 1:
        raise ExportOptionError(f"isolationLevel and kafka.isolation.level disagree: {given}")
    return next(iter(given.values()), "read_uncommitted")


def parse_options(raw: Mapping[str, Any], streaming: bool = False) -> ReadOptions:
    """Check and convert a data source's options (keys in any case); ``streaming`` for
    ``spark.readStream``, where ``startingOffsets`` may be ``latest`` and ending options are refused."""
    options = {str(k).lower(): str(v) for k, v in raw.items() if v is not None}
    check_option_names(options)
    path = options.get("path")
    if not path:
        raise ExportOptionError('a data directory is required: spark.read.format("minikafka").load("<data-dir>")')

    strategies = [k for k in ("subscribe", "subscribepattern", "assign") if k in options]
    if len(strategies) > 1:
        raise ExportOptionError(
            "Only one of the following options can be specified: subscribe, subscribePattern, assign"
        )
    subscribe = pattern = assign = None
    if "subscribe" in options:
        subscribe = tuple(t.strip() for t in options["subscribe"].split(",") if t.strip())
        if not subscribe:
            raise ExportOptionError(
                f"No topics to subscribe to as specified value for option 'subscribe' is '{options['subscribe']}'"
            )
    if "subscribepattern" in options:
        pattern = options["subscribepattern"].strip()
        if not pattern:
            raise ExportOptionError("Pattern to subscribe is empty as specified value for option 'subscribePattern'")
        try:
            re.compile(pattern)
        except re.error as exc:
            raise ExportOptionError(f"invalid subscribePattern {pattern!r}: {exc}") from None
    if "assign" in options:
        assign = parse_assign(options["assign"])

    starting = _limit(options, "starting", "earliest" if not streaming else "latest")
    ending = _limit(options, "ending", "latest")
    if streaming:
        given = [k for k in ("endingoffsets", "endingtimestamp", "endingoffsetsbytimestamp") if k in options]
        if given:
            raise ExportOptionError(f"ending offset not valid in streaming queries: {given[0]}")
    else:
        _check_batch_limits(starting, ending)
    isolation = _isolation_level(options)

    strategy = options.get("startingoffsetsbytimestampstrategy", "error").strip().lower()
    if strategy not in ("error", "latest"):
        raise ExportOptionError(f"startingOffsetsByTimestampStrategy must be 'error' or 'latest', got {strategy!r}")

    max_bytes = _positive(options, "maxBytesPerPartition", DEFAULT_MAX_BYTES_PER_PARTITION)
    assert max_bytes is not None
    return ReadOptions(
        path=path,
        storage=Storage.from_options(path, options),
        subscribe=subscribe,
        subscribe_pattern=pattern,
        assign=assign,
        starting=starting,
        ending=ending,
        no_match_latest=strategy == "latest",
        fail_on_data_loss=_bool(options, "failOnDataLoss", True),
        min_partitions=_positive(options, "minPartitions", None),
        max_records_per_partition=_positive(options, "maxRecordsPerPartition", None),
        max_bytes_per_partition=max_bytes,
        include_headers=_bool(options, "includeHeaders", False),
        include_producer_fields=_bool(options, "includeProducerFields", False),
        max_offsets_per_trigger=_positive(options, "maxOffsetsPerTrigger", None),
        read_committed=isolation == "read_committed",
    )
