"""``minikafka upload``: copy a data directory to object storage for Spark to read there.

::

    minikafka upload --data-dir /var/lib/minikafka --to s3://bucket/prefix \\
        --option fs.s3a.endpoint=http://127.0.0.1:9000 --option fs.s3a.access.key=... --option fs.s3a.secret.key=...

Every file is copied as it is at the moment it is read (pyarrow's ``copy_files``, in parallel),
so a copy of a live broker's directory reads like that directory after a crash: the reader stops
at the last complete batch of each partition. The destination is named the way the data source's
``load()`` names it, with the same connection options.
"""

from __future__ import annotations

import argparse
import sys
import time
from typing import Any


def data_dir_command(subparsers: Any, name: str, summary: str, description: str) -> argparse.ArgumentParser:
    """Add a sub-command that reads a broker's data directory (``--data-dir``, shared by
    ``export`` and ``upload``) to an argparse ``subparsers`` object."""
    p = subparsers.add_parser(name, help=summary, description=description)
    p.add_argument("--data-dir", required=True, help="the broker's data directory (log.dirs), or a cluster's --data-dir")
    return p


def add_parser(subparsers: Any) -> argparse.ArgumentParser:
    p = data_dir_command(
        subparsers, "upload", "copy a data directory to object storage (s3://bucket/prefix) for Spark to read",
        "Copy a broker's data directory to any file system pyarrow writes (S3 and S3-compatible "
        "stores, gs://, hdfs://, or a local path). Needs the 'spark' extra (pyarrow).",
    )
    p.add_argument("--to", required=True, metavar="URL", help="destination, e.g. s3://bucket/prefix")
    p.add_argument("--option", action="append", default=[], metavar="KEY=VALUE",
                   help="connection option, e.g. fs.s3a.endpoint=http://host:9000, fs.s3a.access.key=...")
    p.set_defaults(func=run_upload)
    return p


def parse_key_values(items: list[str]) -> dict[str, str]:
    """``--option KEY=VALUE`` arguments as options (names are case-insensitive: lower-cased)."""
    out: dict[str, str] = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise ValueError(f"--option expects KEY=VALUE, got {item!r}")
        out[key.strip().lower()] = value
    return out


def run_upload(args: argparse.Namespace) -> int:
    err = sys.stderr
    try:
        import pyarrow.fs as pafs
    except ImportError:
        err.write("minikafka upload: needs pyarrow: pip install 'minikafka[spark]'\n")
        return 2
    from minikafka.spark_export.errors import ExportOptionError
    from minikafka.spark_export.files import ArrowFiles, LocalFiles, Storage, StorageError
    from minikafka.spark_export.layout import check_data_dir

    try:
        source = LocalFiles(args.data_dir)
        check_data_dir(source, source.list_dir(args.data_dir))
        dest = Storage.from_options(args.to, parse_key_values(args.option)).files()
        started = time.monotonic()
        if isinstance(dest, ArrowFiles):
            pafs.copy_files(args.data_dir, dest.root, source_filesystem=pafs.LocalFileSystem(),
                            destination_filesystem=dest.fs)
        else:
            pafs.copy_files(args.data_dir, dest.root)
    except (ExportOptionError, ValueError, StorageError) as exc:
        err.write(f"minikafka upload: {exc}\n")
        return 2
    except OSError as exc:
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        err.write(f"minikafka upload: cannot copy to {args.to}: {first}\n")
        return 1
    err.write(f"[upload] {args.data_dir} -> {args.to} in {time.monotonic() - started:.1f} s\n")
    return 0
