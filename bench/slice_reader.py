"""The Spark reader's own cost: every slice of a data directory through ``read_slice``, no Spark.

This is the work a Spark task's Python worker does before Spark sees a row (reading the segment,
checking every batch, decoding the records, building the Arrow batches), timed as CPU seconds of
this one process, so that it can be compared across changes on a machine whose other load moves
wall times around. Each run reads everything; the best run is the figure to compare.

    .venv/bin/python -m bench.export --size 1G --runs 1 --modes local --keep   # prints the data dir
    .venv/bin/python -m bench.slice_reader DATA_DIR [--runs 8] [--subscribe bench-export]
"""

from __future__ import annotations

import argparse
import time

from minikafka.spark_export.options import parse_options
from minikafka.spark_export.planner import plan
from minikafka.spark_export.source import SlicePartition, read_slice


def read_everything(opts: object, slices: list) -> tuple[int, int]:
    rows = value_bytes = 0
    for sl in slices:
        for batch in read_slice(opts, SlicePartition([sl])):  # type: ignore[arg-type]
            rows += batch.num_rows
            value_bytes += batch.column("value").buffers()[2].size
    return rows, value_bytes


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("data_dir", help="a broker's data directory, e.g. one kept by bench.export --keep")
    parser.add_argument("--runs", type=int, default=8)
    parser.add_argument("--subscribe", default="bench-export", help="topics to read (default bench-export)")
    args = parser.parse_args()
    opts = parse_options({"path": args.data_dir, "subscribe": args.subscribe})
    slices = plan(opts)
    size = sum(sl.end_position - sl.start_position for sl in slices)
    best = float("inf")
    for run in range(args.runs):
        started, cpu = time.perf_counter(), time.process_time()
        rows, value_bytes = read_everything(opts, slices)
        cpu = time.process_time() - cpu
        best = min(best, cpu)
        print(f"run {run + 1}: {cpu:.3f} s CPU ({time.perf_counter() - started:.3f} s wall), {rows:,} records, "
              f"{value_bytes:,} value bytes")
    print(f"{len(slices)} slices, {size / 1e6:,.1f} MB: best {best:.3f} s CPU, {size / 2**30 / best:.2f} GiB "
          f"per CPU-second; {best * 2**30 / size:.3f} CPU-seconds per GiB")


if __name__ == "__main__":
    main()
