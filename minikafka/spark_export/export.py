"""``minikafka export``: write a data directory's records to Parquet, JSON or CSV with Spark.

::

    minikafka export --data-dir /var/lib/minikafka --out /tmp/orders.parquet --topics orders

The command plans the read first (so it can say how much it is about to read), then runs one
Spark job through the ``minikafka`` data source and shows the job's progress in tasks (one task
per input partition: consecutive slices of one partition, up to ``maxBytesPerPartition``).
Columns are those of the data source. CSV has no binary or array types, so for CSV the key,
value and header values are written base64-encoded and the headers as a JSON string; ``--utf8``
writes key and value as UTF-8 text instead, in every format.

PySpark is imported only when the command runs; building the parser needs nothing but argparse.
"""

from __future__ import annotations

import argparse
import difflib
import importlib
import json
import os
import sys
import threading
import time
import uuid
from typing import TYPE_CHECKING, Any, TextIO

from minikafka.spark_export.upload import data_dir_command, parse_key_values

if TYPE_CHECKING:
    from minikafka.spark_export.options import ReadOptions
    from minikafka.spark_export.planner import PartitionRange

FORMATS = ("parquet", "json", "csv")


def add_parser(subparsers: Any) -> argparse.ArgumentParser:
    """Add the ``export`` sub-command to an argparse ``subparsers`` object."""
    p = data_dir_command(
        subparsers, "export", "write the records of a data directory to Parquet/JSON/CSV with Spark",
        "Read minikafka's (or Kafka's) log segments with Spark and write them out. "
        "Needs the 'spark' extra (pyspark >= 4.0).",
    )
    p.add_argument("--out", required=True, help="output directory (Spark writes one file per task)")
    p.add_argument("--format", choices=FORMATS, default="parquet", help="output format (default parquet)")
    p.add_argument("--topics", nargs="+", metavar="TOPIC",
                   help="topics to export, space- or comma-separated (default: all but internal topics)")
    p.add_argument("--pattern", help="export topics whose whole name matches this regular expression")
    p.add_argument("--starting-offsets", help="'earliest' or JSON per partition, as Spark's Kafka source")
    p.add_argument("--ending-offsets", help="'latest' or JSON per partition, as Spark's Kafka source")
    p.add_argument("--starting-timestamp", type=int, help="first record time, ms since the epoch")
    p.add_argument("--ending-timestamp", type=int, help="end record time (exclusive), ms since the epoch")
    p.add_argument("--include-headers", action="store_true", help="add the headers column")
    p.add_argument("--include-producer-fields", action="store_true",
                   help="add producerId, producerEpoch, sequence, isTransactional")
    p.add_argument("--isolation-level", choices=("read_uncommitted", "read_committed"),
                   default="read_uncommitted",
                   help="read_committed: leave out aborted transactions and stop at the first open one "
                   "(default read_uncommitted, like a plain consumer)")
    p.add_argument("--skip-damaged", action="store_true",
                   help="skip corrupt or missing data instead of failing (failOnDataLoss=false)")
    p.add_argument("--utf8", action="store_true", help="write key and value as UTF-8 strings")
    p.add_argument("--partition-by", nargs="+", choices=("topic", "partition"),
                   help="lay the output out in topic=/partition= directories")
    p.add_argument("--mode", choices=("errorifexists", "overwrite", "append"), default="errorifexists",
                   help="what to do when --out exists (default: fail)")
    p.add_argument("--compression", help="output compression codec, e.g. none, snappy, zstd, gzip "
                   "(default: Spark's for the format)")
    p.add_argument("--master", default="local[*]", help="Spark master (default local[*])")
    p.add_argument("--option", action="append", default=[], metavar="KEY=VALUE",
                   help="any other data source option, e.g. maxRecordsPerPartition=1000000")
    p.add_argument("--no-progress", action="store_true", help="do not show the progress display")
    p.set_defaults(func=run_export)
    return p


def source_options(args: argparse.Namespace) -> dict[str, str]:
    """The data source options the command line asks for."""
    opts: dict[str, str] = {}
    if args.topics:
        topics = [t.strip() for arg in args.topics for t in arg.split(",") if t.strip()]
        opts["subscribe"] = ",".join(topics)
    if args.pattern:
        opts["subscribePattern"] = args.pattern
    if args.starting_offsets:
        opts["startingOffsets"] = args.starting_offsets
    if args.ending_offsets:
        opts["endingOffsets"] = args.ending_offsets
    if args.starting_timestamp is not None:
        opts["startingTimestamp"] = str(args.starting_timestamp)
    if args.ending_timestamp is not None:
        opts["endingTimestamp"] = str(args.ending_timestamp)
    opts["includeHeaders"] = str(bool(args.include_headers)).lower()
    opts["includeProducerFields"] = str(bool(args.include_producer_fields)).lower()
    opts["failOnDataLoss"] = str(not args.skip_damaged).lower()
    opts["isolationLevel"] = args.isolation_level
    opts.update(parse_key_values(args.option))
    return opts


def _human(n: float) -> str:
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if n < 1024 or unit == "TiB":
            return f"{n:.1f} {unit}" if unit != "B" else f"{int(n)} B"
        n /= 1024
    return f"{n:.1f} TiB"


#: The local property Spark files a thread's jobs under (what ``SparkContext.setJobGroup`` sets).
_JOB_GROUP = "spark.jobGroup.id"


class Progress:
    """Counts the tasks of the Spark jobs run inside it, and prints them to ``out`` until stopped
    (a line per update on a terminal, one every few seconds otherwise; nothing with ``show=False``).

    The jobs are filed under a job group of their own, so the counts are those of the export's
    own job, not of whatever else a shared session runs meanwhile, and they include its finished
    stages: :meth:`counts` at the end says how many tasks actually ran.
    """

    def __init__(self, spark_context: Any, out: TextIO = sys.stderr, interval: float | None = None,
                 show: bool = True) -> None:
        self.sc = spark_context
        self.out = out
        self.tty = out.isatty()
        self.show = show
        self.interval = interval if interval is not None else (0.5 if self.tty else 5.0)
        self.group = f"minikafka-export-{uuid.uuid4().hex}"
        self._saved_group: str | None = None
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="export-progress", daemon=True)
        self.start_time = time.monotonic()

    def __enter__(self) -> Progress:
        self._saved_group = self.sc.getLocalProperty(_JOB_GROUP)
        self.sc.setLocalProperty(_JOB_GROUP, self.group)  # this thread's jobs, until __exit__
        if self.show:
            self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.sc.setLocalProperty(_JOB_GROUP, self._saved_group)  # None clears it
        if not self.show:
            return
        self._stop.set()
        self._thread.join(timeout=5)
        if self.tty:
            self.out.write("\n")
            self.out.flush()

    def counts(self) -> tuple[int, int, int]:
        """(tasks done, running, in all) of the jobs run inside this block so far."""
        tracker = self.sc.statusTracker()
        done = active = total = 0
        for job_id in tracker.getJobIdsForGroup(self.group):
            job = tracker.getJobInfo(job_id)
            for stage_id in job.stageIds if job is not None else ():
                info = tracker.getStageInfo(stage_id)
                if info is None:  # a stage that never ran (its output was reused)
                    continue
                done += info.numCompletedTasks
                active += info.numActiveTasks
                total += info.numTasks
        return done, active, total

    def _line(self) -> str | None:
        done, active, total = self.counts()
        if total == 0:
            return None
        pct = 100.0 * done / total
        elapsed = time.monotonic() - self.start_time
        return f"[export] {done}/{total} tasks done, {active} running ({pct:.0f}%), {elapsed:.0f} s"

    def _run(self) -> None:
        while not self._stop.wait(self.interval):
            try:
                line = self._line()
            except Exception:  # the context may be shutting down
                return
            if line is None:
                continue
            self.out.write(("\r" + line.ljust(78)) if self.tty else line + "\n")
            self.out.flush()


def _prepare(df: Any, fmt: str, utf8: bool) -> Any:
    """Columns the output format can hold."""
    from pyspark.sql import functions as F

    if utf8:
        df = df.withColumn("key", F.col("key").cast("string")).withColumn("value", F.col("value").cast("string"))
    def b64(col: Any) -> Any:  # one line per value: Spark may wrap base64 output at 76 characters
        return F.regexp_replace(F.base64(col), "[\\r\\n]", "")

    if fmt == "csv":
        if not utf8:
            df = df.withColumn("key", b64("key")).withColumn("value", b64("value"))
        if "headers" in df.columns:
            df = df.withColumn(
                "headers",
                F.to_json(F.transform("headers", lambda h: F.struct(h["key"].alias("key"), b64(h["value"]).alias("value")))),
            )
    return df


#: Options that choose partitions and offsets; the command replaces them with the planned ranges.
_RANGE_OPTIONS = {"subscribe", "subscribepattern", "assign", "startingoffsets", "endingoffsets", "startingtimestamp",
                  "endingtimestamp", "startingoffsetsbytimestamp", "endingoffsetsbytimestamp",
                  "startingoffsetsbytimestampstrategy"}


def pinned_options(opts: dict[str, str], ranges: list[Any]) -> dict[str, str]:
    """``opts`` with the partitions and offsets replaced by the ranges the plan resolved, so that
    the Spark job reads exactly what the plan line announced even if the broker keeps writing."""
    out = {k: v for k, v in opts.items() if k.lower() not in _RANGE_OPTIONS}
    assign: dict[str, list[int]] = {}
    starting: dict[str, dict[str, int]] = {}
    ending: dict[str, dict[str, int]] = {}
    for rng in ranges:
        topic, partition = rng.tp
        assign.setdefault(topic, []).append(partition)
        starting.setdefault(topic, {})[str(partition)] = rng.start
        ending.setdefault(topic, {})[str(partition)] = rng.end
    out["assign"] = json.dumps(assign)
    out["startingOffsets"] = json.dumps(starting)
    out["endingOffsets"] = json.dumps(ending)
    return out


def check_topics(read_opts: ReadOptions, ranges: list[PartitionRange]) -> None:
    """Refuse, before Spark starts, to export topics the data directory does not hold, or a
    directory with no topics: the read would be empty, which on the command line is a mistake to
    report (with the topics there are), not an empty output to write."""
    from minikafka.spark_export.errors import ExportOptionError
    from minikafka.spark_export.layout import list_partitions

    found = {rng.tp[0] for rng in ranges}
    missing = [t for t in read_opts.subscribe or () if t not in found]
    if found and not missing:
        return
    topics = sorted({p.topic for p in list_partitions(read_opts.storage.files()) if not p.is_internal})
    if not topics:
        raise ExportOptionError(f"{read_opts.path} holds no topics")
    if missing:
        close = [c for t in missing for c in difflib.get_close_matches(t, topics, n=1)]
        named = f"no topic named {missing[0]}" if len(missing) == 1 else f"no topics named {', '.join(missing)}"
        problem = f"{named} in {read_opts.path}" + (
            f" (did you mean {' or '.join(close)}?)" if close else "")
    elif read_opts.subscribe_pattern is not None:
        problem = f"no topic in {read_opts.path} matches {read_opts.subscribe_pattern!r}"
    else:
        problem = f"the options select no partition of {read_opts.path}"
    shown = ", ".join(topics[:20]) + (f" and {len(topics) - 20} more" if len(topics) > 20 else "")
    raise ExportOptionError(f"{problem}; its topics are {shown}")


def missing_spark_extra() -> str | None:
    """The first package of the ``spark`` extra that cannot be imported, or None."""
    for module in ("numpy", "pyarrow", "pyspark.sql.datasource"):
        try:
            importlib.import_module(module)
        except ImportError:
            return module.split(".")[0]
    return None


def _out_exists(out: str) -> bool:
    if "://" in out and not out.startswith("file://"):
        return False  # a remote file system: Spark checks it when the job starts
    return os.path.exists(out.removeprefix("file://"))


def run_export(args: argparse.Namespace) -> int:
    """Run the export; returns the process exit code."""
    err = sys.stderr
    missing = missing_spark_extra()
    if missing is not None:
        err.write(f"minikafka export: needs PySpark 4 with pyarrow and numpy ({missing} is not installed): "
                  "pip install 'minikafka[spark]'\n")
        return 2
    if args.mode == "errorifexists" and _out_exists(args.out):
        err.write(f"minikafka export: --out {args.out} already exists; choose a new path, or --mode overwrite "
                  "or --mode append\n")
        return 2

    from minikafka.spark_export.errors import DataLossError, ExportOptionError
    from minikafka.spark_export.files import StorageError
    from minikafka.spark_export.options import parse_options
    from minikafka.spark_export.planner import plan_read

    try:
        opts = source_options(args)
        read_opts = parse_options({**opts, "path": args.data_dir})
        ranges, parts = plan_read(read_opts)
        check_topics(read_opts, ranges)
    except (ExportOptionError, ValueError, FileNotFoundError, StorageError) as exc:
        err.write(f"minikafka export: {exc}\n")
        return 2
    except DataLossError as exc:
        err.write(f"minikafka export: {exc}\n")
        return 1
    opts = pinned_options(opts, ranges)

    slices = [sl for part in parts for sl in part]
    nbytes = sum(s.end_position - s.start_position for s in slices)
    partitions = len({(s.topic, s.partition) for s in slices})
    offsets = sum(s.end_offset - s.start_offset for s in slices)
    tasks = len(parts) or 1  # Spark reads a source that plans no input partition with one empty task
    err.write(f"[export] {args.data_dir}: {partitions} partitions, {len(slices)} slices in {tasks} tasks, "
              f"{_human(nbytes)}, up to {offsets} records -> {args.out} ({args.format})\n")

    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    from pyspark.sql import SparkSession

    from minikafka.spark_export import register

    active = SparkSession.getActiveSession()
    spark = active or (
        SparkSession.builder.master(args.master)
        .appName("minikafka-export")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.session.timeZone", "UTC")
        .getOrCreate()
    )
    if active is None:
        spark.sparkContext.setLogLevel("ERROR")
    started = time.monotonic()
    try:
        register(spark)
        df = _prepare(spark.read.format("minikafka").options(**opts).load(args.data_dir), args.format, args.utf8)
        writer = df.write.mode(args.mode)
        if args.compression:
            writer = writer.option("compression", args.compression)
        if args.format == "csv":
            writer = writer.option("header", "true")
        if args.partition_by:
            writer = writer.partitionBy(*args.partition_by)
        with Progress(spark.sparkContext, err, show=not args.no_progress) as progress:
            writer.format(args.format).save(args.out)
        elapsed = time.monotonic() - started
        done, _, total = progress.counts()
        summary = (f"[export] done in {elapsed:.1f} s, {done}/{total} tasks "
                   f"({_human(nbytes / elapsed if elapsed else 0)}/s of segments)")
        if args.format == "parquet":
            summary += f", {spark.read.parquet(args.out).count()} records in the output"
        err.write(summary + "\n")
        return 0
    except Exception as exc:
        message = str(exc).strip().splitlines()
        detail = next((line for line in message if "Error:" in line or "Exception:" in line), message[0] if message else "")
        err.write(f"minikafka export: failed: {detail}\n")
        return 1
    finally:
        if active is None:  # a session the caller had open stays open
            spark.stop()
