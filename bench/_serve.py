"""Run ``minikafka serve`` in a child process for a benchmark, on a free port and a fresh data dir."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import IO

#: Where data dirs go when a benchmark wants them in memory (so disk writeback stalls do not drown
#: the difference it measures): /dev/shm where the machine has it, else None (the temp dir).
MEMORY_DIR: str | None = "/dev/shm" if os.path.isdir("/dev/shm") else None


def checkout_env(checkout: str | None) -> dict[str, str] | None:
    """The environment that makes ``python -m minikafka`` import the package of ``checkout`` (None:
    this one's)."""
    if checkout is None:
        return None
    return {**os.environ, "PYTHONPATH": os.path.abspath(checkout)}


@contextmanager
def serve(
    *args: str, data_dir: str | None = None, data_dir_base: str | None = None,
    env: dict[str, str] | None = None, log: IO[str] | None = None
) -> Iterator[tuple[str, subprocess.Popen[str], str]]:
    """Yield (bootstrap, process, data dir); the broker (or cluster) is stopped with SIGTERM afterwards.

    Without ``data_dir`` a fresh one is made under ``data_dir_base`` (default: ``$BENCH_DIR`` or
    the temp dir) and removed afterwards. ``env``: the child's environment (default: this one's);
    ``log`` receives the broker's log (default: this process's stderr)."""
    made = data_dir is None
    directory = data_dir or tempfile.mkdtemp(prefix="minikafka-bench-",
                                             dir=data_dir_base or os.environ.get("BENCH_DIR"))
    proc = subprocess.Popen(
        [sys.executable, "-m", "minikafka", "serve", "--port", "0", "--data-dir", directory,
         "--log-level", "WARNING", *args],
        stdout=subprocess.PIPE,
        stderr=log,
        text=True,
        env=env,
    )
    assert proc.stdout is not None
    deadline = time.monotonic() + 60
    line = ""
    while time.monotonic() < deadline:
        line = proc.stdout.readline()
        if "listening on" in line or not line:
            break
    match = re.search(r"listening on (\S+:\d+)", line)
    if not match:
        proc.kill()
        raise RuntimeError(f"broker did not start: {line!r}")
    # one address, or a cluster's (``--brokers N``): "host:port,host:port,..."
    ports = [address.rpartition(":")[2] for address in match.group(1).split(",")]
    try:
        yield ",".join(f"127.0.0.1:{port}" for port in ports), proc, directory
    finally:
        proc.terminate()
        reap(proc)
        if made:
            shutil.rmtree(directory, ignore_errors=True)


def reap(proc: subprocess.Popen[str]) -> None:
    """Wait for a child asked to stop (killed after 30 s) and close its output pipe."""
    try:
        proc.wait(30)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(30)
    if proc.stdout is not None:
        proc.stdout.close()


def cpu_seconds(pid: int) -> float:
    """User + system CPU time of process ``pid`` (all its threads), from /proc/<pid>/stat."""
    with open(f"/proc/{pid}/stat") as stat:
        fields = stat.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")  # utime, stime: fields 14, 15


def plain_write_seconds(total_bytes: int, directory: str, chunk: int = 1 << 20) -> float:
    """Seconds for a plain sequential os.write of ``total_bytes`` to a file in ``directory``."""
    buf = os.urandom(chunk)
    path = os.path.join(directory, "plain-write.bin")
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    started = time.perf_counter()
    try:
        written = 0
        while written < total_bytes:
            n = min(chunk, total_bytes - written)
            os.write(fd, buf[:n] if n < chunk else buf)
            written += n
    finally:
        os.close(fd)
    elapsed = time.perf_counter() - started
    os.unlink(path)
    return elapsed
