"""fsync of a partition's files: what :meth:`PartitionLog.flush
<minikafka.storage.log.PartitionLog.flush>` and a clean close make durable.

A flush works on duplicated descriptors (:func:`dup_unflushed_fds`) so that it can run in a
worker thread while the event loop rolls or deletes segments; a clean close trims the indexes and
syncs every file of the partition, then the directory (docs/semantics.md#clean-shutdown).
"""

from __future__ import annotations

import logging
import os
from collections.abc import Sequence
from pathlib import Path

from minikafka.storage.disk_format import offset_file_name
from minikafka.storage.segment import LogSegment

log = logging.getLogger(__name__)


def fsync_path(path: Path) -> None:
    """fsync a file or directory by name; one that no longer exists is skipped."""
    try:
        fd = os.open(path, os.O_RDONLY)
    except FileNotFoundError:
        return
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def dup_unflushed_fds(segments: Sequence[LogSegment], recovery_point: int) -> list[int]:
    """Duplicated descriptors of the files of every segment with data past ``recovery_point``
    (and of the active segment); the caller closes them (:func:`fsync_flushed` does)."""
    fds: list[int] = []
    try:
        for seg in segments:
            if seg.next_offset > recovery_point or seg is segments[-1]:
                fds.extend(seg.dup_fds())
    except OSError:
        for fd in fds:
            os.close(fd)
        raise
    return fds


def fsync_flushed(directory: Path, fds: list[int], snapshot_offsets: list[int], sync_dir: bool) -> None:
    """fsync ``fds`` (closing them), the snapshots at ``snapshot_offsets`` and, with
    ``sync_dir``, the directory. Raises OSError on the first failure."""
    try:
        for fd in fds:
            os.fsync(fd)
        for offset in snapshot_offsets:
            fsync_path(directory / offset_file_name(offset, ".snapshot"))
        if sync_dir:
            fsync_path(directory)
    finally:
        for fd in fds:
            os.close(fd)


def close_files(name: str, directory: Path, segments: Sequence[LogSegment], snapshot_offsets: list[int]) -> None:
    """A clean close of the partition's files: trim the indexes, fsync every segment, index,
    pending snapshot and the directory, close the descriptors. Failures are logged: a close
    goes on (the next load then recovers from what is on disk)."""
    for seg in segments:
        seg.on_become_inactive()
    for seg in segments:
        try:
            os.fsync(seg.fd)
        except OSError as e:
            log.error("%s: fsync of segment %d failed: %s", name, seg.base_offset, e)
    try:
        for offset in snapshot_offsets:
            fsync_path(directory / offset_file_name(offset, ".snapshot"))
        for seg in segments:
            fsync_path(seg.offset_index.path)
            fsync_path(seg.time_index.path)
            fsync_path(seg.txn_index.path)
        fsync_path(directory)
    except OSError as e:
        log.error("%s: fsync at close failed: %s", name, e)
    for seg in segments:
        seg.close()
