"""Start-up time: from "start" to the first successful Metadata answer.

* ``minikafka serve``: from spawning the process to a Metadata v1 answer on its port (the
  client polls the port every millisecond). Targets: under 0.2 s (a Rust peer starts in about
  10 ms, a JVM Kafka in about 1.2 s).
* the in-process broker the pytest fixture uses (:class:`minikafka.testkit.MiniKafka`): from
  ``start()`` to the Metadata answer, in a process that has imported minikafka already.
  Target: under 0.01 s.

Each is the median of ``--runs`` (10) starts over a fresh data dir. ``--importtime`` also runs
``minikafka serve`` under ``python -X importtime`` and lists where its import time goes.

Usage: ``python bench/startup.py [--runs N] [--data-root DIR] [--baseline] [--importtime]``
"""

from __future__ import annotations

import argparse
import os
import shutil
import signal
import socket
import statistics
import struct
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

#: Metadata v1 for no topics (null array -1 would mean all topics; 0 = none)
_METADATA_V1 = struct.pack(">hhih", 3, 1, 1, 5) + b"bench" + struct.pack(">i", 0)
METADATA_REQUEST = struct.pack(">i", len(_METADATA_V1)) + _METADATA_V1


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def metadata_round_trip(port: int, deadline: float) -> bool:
    """One Metadata request; False if the port does not accept yet (refused)."""
    try:
        sock = socket.create_connection(("127.0.0.1", port), timeout=max(0.1, deadline - time.perf_counter()))
    except ConnectionRefusedError:
        return False
    with sock:
        sock.sendall(METADATA_REQUEST)
        data = b""
        while len(data) < 8 or len(data) < 4 + struct.unpack_from(">i", data)[0]:
            chunk = sock.recv(65536)
            if not chunk:
                return False
            data += chunk
        assert struct.unpack_from(">i", data, 4)[0] == 1, "wrong correlation id"
    return True


def wait_for_metadata(port: int, timeout: float = 30) -> None:
    deadline = time.perf_counter() + timeout
    while not metadata_round_trip(port, deadline):
        if time.perf_counter() > deadline:
            raise TimeoutError(f"no Metadata answer on port {port} within {timeout} s")
        time.sleep(0.001)


def serve_command() -> list[str]:
    script = Path(sys.executable).parent / "minikafka"
    return [str(script)] if script.exists() else [sys.executable, "-m", "minikafka"]


def time_serve(runs: int, eager: bool = False, data_root: str | None = None) -> tuple[list[float], list[float]]:
    """(wall seconds to the Metadata answer, CPU seconds the serve process used by then) per run.

    ``eager`` sets MINIKAFKA_EAGER_IMPORTS=1: kafka-python's and crc32c's package ``__init__``
    run at import as they normally would (the baseline for minikafka._kafka_codec)."""
    env = {**os.environ, "MINIKAFKA_EAGER_IMPORTS": "1" if eager else "0"}
    walls, cpus = [], []
    for _ in range(runs):
        port = free_port()
        data_dir = tempfile.mkdtemp(prefix="minikafka-bench-", dir=data_root)
        started = time.perf_counter()
        process = subprocess.Popen([*serve_command(), "serve", "--port", str(port), "--data-dir", data_dir,
                                    "--log-level", "WARNING"], stdout=subprocess.DEVNULL, env=env)
        try:
            wait_for_metadata(port)
            walls.append(time.perf_counter() - started)
            cpus.append(process_cpu_seconds(process.pid))
        finally:
            process.send_signal(signal.SIGTERM)
            process.wait(timeout=30)
            shutil.rmtree(data_dir, ignore_errors=True)
    return walls, cpus


def process_cpu_seconds(pid: int) -> float:
    """User + system CPU time a running process has used so far (Linux /proc, clock-tick resolution)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def time_in_process(runs: int) -> tuple[list[float], list[float]]:
    """(start() returned, Metadata answered) per run."""
    from minikafka.testkit import MiniKafka

    started_times, answered_times = [], []
    for _ in range(runs):
        kafka = MiniKafka()
        started = time.perf_counter()
        kafka.start()
        returned = time.perf_counter()
        try:
            wait_for_metadata(kafka.port)
            answered = time.perf_counter()
        finally:
            kafka.stop()
        started_times.append(returned - started)
        answered_times.append(answered - started)
    return started_times, answered_times


def import_profile(top: int = 14) -> None:
    """Run ``minikafka serve`` under ``-X importtime``; print the costliest imports."""
    port = free_port()
    data_dir = tempfile.mkdtemp(prefix="minikafka-bench-")
    command = serve_command()
    if command[0] != sys.executable:
        command = [sys.executable, command[0]]
    process = subprocess.Popen([command[0], "-X", "importtime", *command[1:], "serve", "--port", str(port),
                                "--data-dir", data_dir, "--log-level", "WARNING"],
                               stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        wait_for_metadata(port)
    finally:
        process.send_signal(signal.SIGTERM)
        _, stderr = process.communicate(timeout=30)
        shutil.rmtree(data_dir, ignore_errors=True)
    rows = []
    for line in stderr.splitlines():
        if not line.startswith("import time:") or "cumulative" in line:
            continue
        self_us, cumulative_us, name = line.removeprefix("import time:").split("|", 2)
        rows.append((int(cumulative_us), int(self_us), name.rstrip()[1:]))
    top_level = [r for r in rows if not r[2].startswith(" ")]
    print(f"\nimports of `minikafka serve` (python -X importtime): {sum(r[0] for r in top_level) / 1000:.1f} ms "
          f"in {len(rows)} modules")
    print("  costliest (cumulative ms, self ms, module; indentation = nesting):")
    for cumulative, self_us, name in sorted(rows, reverse=True)[:top]:
        print(f"  {cumulative / 1000:8.1f} {self_us / 1000:7.1f}  {name}")
    kafka_rows = [r for r in rows if r[2].strip() == "kafka" or r[2].strip().startswith("kafka.")]
    client_modules = [r[2].strip() for r in kafka_rows
                      if r[2].strip().split(".")[:2] in (["kafka", "producer"], ["kafka", "consumer"], ["kafka", "admin"])]
    print(f"  kafka-python modules loaded: {len(kafka_rows)}; of its client (producer/consumer/admin): "
          f"{len(client_modules)}")


def describe(times: list[float]) -> str:
    return (f"median {statistics.median(times) * 1000:7.1f} ms   min {min(times) * 1000:7.1f}   "
            f"max {max(times) * 1000:7.1f}   (n={len(times)})")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=10)
    parser.add_argument("--importtime", action="store_true", help="also show where import time goes")
    parser.add_argument("--data-root", default=None,
                        help="where serve's fresh data dirs go (default: the system temp dir; /dev/shm takes "
                             "the first start's fsyncs out of the measurement)")
    parser.add_argument("--baseline", action="store_true",
                        help="also time serve with MINIKAFKA_EAGER_IMPORTS=1 (kafka/__init__ run at import)")
    args = parser.parse_args()
    print(f"python {sys.version.split()[0]}, {os.cpu_count()} cpus, load average {os.getloadavg()[0]:.2f}")
    print(f"serve data dirs in {args.data_root or tempfile.gettempdir()}")
    serve, serve_cpu = time_serve(args.runs, data_root=args.data_root)
    print(f"minikafka serve  -> Metadata answered: {describe(serve)}   target < 200 ms")
    print(f"  CPU time the process used by then:   {describe(serve_cpu)}")
    if args.baseline:
        eager, eager_cpu = time_serve(args.runs, eager=True, data_root=args.data_root)
        print(f"  same with MINIKAFKA_EAGER_IMPORTS=1: {describe(eager)}")
        print(f"  CPU time the process used by then:   {describe(eager_cpu)}")
    started, answered = time_in_process(args.runs)
    print(f"in-process start -> start() returned:  {describe(started)}")
    print(f"in-process start -> Metadata answered: {describe(answered)}   target < 10 ms "
          f"(first run {answered[0] * 1000:.1f} ms)")
    if args.importtime:
        import_profile()


if __name__ == "__main__":
    main()
