"""One broker per data directory: an exclusive lock on ``<data-dir>/.lock``.

Two brokers on one data dir each remove what they think is stale and overwrite each other's
checkpoints and snapshots, so acknowledged records are lost. Kafka holds an exclusive lock on a
``.lock`` file in every log dir for as long as the broker runs and refuses to start when another
process holds it (``LogManager.lockLogDirs``,
https://github.com/apache/kafka/blob/trunk/core/src/main/scala/kafka/log/LogManager.scala, and
``FileLock``, https://github.com/apache/kafka/blob/trunk/server-common/src/main/java/org/apache/kafka/server/util/FileLock.java).
minikafka does the same with ``flock``, which the kernel releases when the holder dies (kill -9
included) and which also refuses a second broker in the same process (the test kit runs several
brokers in one interpreter). The holder's process id is written into the file so the refusal can
say who holds it; the file itself is never removed, as in Kafka.
"""

from __future__ import annotations

import fcntl
import os
from pathlib import Path

from minikafka.startup_errors import DataDirError

LOCK_FILE = ".lock"


class DataDirLock:
    """Held from :meth:`acquire` until :meth:`release` (or the process ends)."""

    def __init__(self, data_dir: Path) -> None:
        self.path = data_dir / LOCK_FILE
        self._fd: int | None = None

    @property
    def held(self) -> bool:
        return self._fd is not None

    def acquire(self) -> None:
        """Take the lock, or raise :class:`DataDirError` naming the dir and its holder. A refused
        acquire changes nothing in the dir (the file exists already when someone holds it)."""
        if self._fd is not None:
            return
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = _holder(fd)
            os.close(fd)
            raise DataDirError(
                f"data dir {self.path.parent} is in use by another broker ({holder} holds {self.path}); "
                "stop it or give this broker another data dir") from None
        except BaseException:
            os.close(fd)
            raise
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
        self._fd = fd

    def release(self) -> None:
        if self._fd is not None:
            fd, self._fd = self._fd, None
            os.close(fd)  # closing the only descriptor drops the flock

    def __del__(self) -> None:  # a broker object dropped without stop() must not keep its dir locked
        self.release()


def _holder(fd: int) -> str:
    """Who holds the lock, from what the holder wrote into it."""
    try:
        pid = int(os.pread(fd, 32, 0).split()[0])
    except (OSError, ValueError, IndexError):
        return "a process"
    return f"this process (pid {pid})" if pid == os.getpid() else f"process {pid}"
