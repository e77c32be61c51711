"""Replacing a small file so that a crash leaves the old or the new version, never a mix.

Every metadata file of a data directory (checkpoints, ``meta.properties``, the topic catalogue,
producer-state snapshots, rebuilt indexes, the producer-id reservation) is written the same way,
as Kafka writes its checkpoint files (``server-common/src/main/java/org/apache/kafka/server/common/CheckpointFile.java``):
a temporary file beside it, every byte written, fsync, rename over the old name, fsync of the
directory so the rename itself survives a power cut.
"""

from __future__ import annotations

import os
from pathlib import Path


def fsync_dir(directory: Path) -> None:
    """Make the creations, renames and deletions in ``directory`` durable."""
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def atomic_write(path: Path, data: bytes | bytearray, durable: bool = True, temp: Path | None = None) -> None:
    """Replace ``path`` with ``data`` through ``temp`` (default ``<name>.tmp``) and a rename.

    ``durable=False`` skips both fsyncs, for files the broker can rebuild at load from what is
    durable elsewhere: a reader still sees the whole file or none under the final name, but a
    crash of the machine can leave it empty or short.
    """
    temp = temp if temp is not None else path.with_name(path.name + ".tmp")
    fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        view = memoryview(data)
        while view:  # os.write may write less than it was given
            view = view[os.write(fd, view):]
        if durable:
            os.fsync(fd)
    finally:
        os.close(fd)
    try:
        os.replace(temp, path)
    except BaseException:
        temp.unlink(missing_ok=True)
        raise
    if durable:
        fsync_dir(path.parent)
