"""librdkafka's mock broker as a standalone peer process, for benchmarks that compare against it.

confluent-kafka starts the mock cluster inside any client created with ``test.mock.num.brokers``;
this module creates such a client, prints the mock broker's address from the client's metadata
and sleeps until its stdin closes, so the benchmark can talk to the mock over loopback like to
any other broker and read its CPU time from /proc.

    python -m bench._mock        # prints "mock broker at 127.0.0.1:PORT"
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager

from bench._serve import reap


@contextmanager
def mock_broker() -> Iterator[tuple[str, subprocess.Popen[str]]]:
    """Yield (bootstrap, process) of a mock broker in a child process; stopped afterwards."""
    proc = subprocess.Popen([sys.executable, "-m", "bench._mock"], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            text=True)
    assert proc.stdout is not None and proc.stdin is not None
    line = proc.stdout.readline()
    if not line.startswith("mock broker at "):
        proc.kill()
        raise RuntimeError(f"mock broker did not start: {line!r}")
    try:
        yield line.split()[-1], proc
    finally:
        proc.stdin.close()  # the child exits when its stdin ends
        reap(proc)


def main() -> None:
    from confluent_kafka import Producer

    # The mock broker lives as long as this client; it keeps every topic's records in memory.
    client = Producer({"test.mock.num.brokers": 1, "log_level": 3})
    broker = next(iter(client.list_topics(timeout=30).brokers.values()))
    print(f"mock broker at {broker.host}:{broker.port}", flush=True)
    while sys.stdin.read(1):
        pass


if __name__ == "__main__":
    main()
