"""What a live console page costs the broker: ``bench.reqrate``'s load with and without a page subscribed.

One ``minikafka serve --admin-port`` process; rounds alternate between "nobody watches" and
"a page is subscribed to GET /events" (the snapshot feed the console renders). The subscriber
is a separate process reading the stream as the browser would (``--browser``: the real page in
headless chromium, which also costs the shared machine's CPU for rendering). Load and
measurements are bench.reqrate's: pipelined 1-record idempotent Produce requests.

    .venv/bin/python -m bench.console_cost [--rounds 3] [--requests 10000] [--browser]
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import statistics
import subprocess
import sys
import urllib.request
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from typing import Any

from bench._serve import reap, serve
from bench.reqrate import Peer, RunResult, build_frames, fmt_range, prepare, run_load

#: a page's subscription, in a process of its own: read every event, say when the first came
SUBSCRIBER = """
import sys, urllib.request
with urllib.request.urlopen(sys.argv[1] + "/events", timeout=60) as stream:
    events = 0
    for line in stream:
        if line.startswith(b"data: "):
            events += 1
            if events == 1:
                print("subscribed", flush=True)
"""


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@contextmanager
def subscribed(admin: str, browser: bool) -> Iterator[None]:
    """A page subscribed to the feed for the duration (its first snapshot received first)."""
    if browser:
        from bench.console_screenshots import shown
        from tests.browser_helpers import chromium

        with chromium() as driver:
            driver.get(admin + "/ui")
            shown(driver, "#connection", "live")
            yield
        return
    proc = subprocess.Popen([sys.executable, "-c", SUBSCRIBER, admin], stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None and proc.stdout.readline().strip() == "subscribed"
        yield
    finally:
        proc.terminate()
        reap(proc)


def first_snapshot(admin: str) -> dict[str, Any]:
    """The feed's first snapshot after a warm-up one (whose build time is then known)."""
    for _ in range(2):
        with urllib.request.urlopen(admin + "/events", timeout=30) as stream:
            data = next(line for line in stream if line.startswith(b"data: "))
    return dict(json.loads(data[6:]))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--connections", type=int, default=4)
    parser.add_argument("--in-flight", type=int, default=5)
    parser.add_argument("--requests", type=int, default=10_000, help="requests per connection per round")
    parser.add_argument("--rounds", type=int, default=3, help="rounds of each (watched, unwatched)")
    parser.add_argument("--produce-version", type=int, default=9)
    parser.add_argument("--browser", action="store_true", help="subscribe with the real page in headless chromium")
    args = parser.parse_args()
    value = os.urandom(100)
    port = free_port()
    admin = f"http://127.0.0.1:{port}"
    with serve("--admin-port", str(port)) as (bootstrap, proc, _data):
        peer = Peer("minikafka", bootstrap, proc.pid, [f"reqrate-{c}" for c in range(args.connections)])
        prepare(peer)
        run_load(peer, build_frames(peer, args.produce_version, min(500, args.requests), value), args.in_flight,
                 args.produce_version)
        results: dict[str, list[RunResult]] = {"unwatched": [], "watched": []}
        for r in range(args.rounds * 2):
            name = ("unwatched", "watched")[(r + r // 2) % 2]  # u w w u u w ...: neither always goes first
            frames = build_frames(peer, args.produce_version, args.requests, value)
            with ExitStack() as stack:
                if name == "watched":
                    stack.enter_context(subscribed(admin, args.browser))
                result = run_load(peer, frames, args.in_flight, args.produce_version)
            results[name].append(result)
            print(f"round {r + 1} {name:<9}: {result.rate:8.0f} requests/s  p99 {result.percentile(0.99):6.2f} ms  "
                  f"broker CPU {result.cpu_us:6.1f} us/request", flush=True)
        snapshot = first_snapshot(admin)
    print(f"one snapshot of this broker ({len(snapshot['partitions'])} partitions) takes "
          f"{snapshot['feed']['build_ms']:.2f} ms to build, {len(json.dumps(snapshot))} bytes, "
          f"at most every {snapshot['feed']['interval_ms']} ms while watched")
    print(f"{args.connections} connections x {args.in_flight} in flight, {args.requests} requests each per round; "
          f"page: {'headless chromium' if args.browser else 'an SSE subscriber process'}; median (range) of "
          f"{args.rounds} rounds each")
    for name, rs in results.items():
        print(f"{name:<9}: {fmt_range([r.rate for r in rs], '.0f')} requests/s, "
              f"p99 {fmt_range([r.percentile(0.99) for r in rs], '.2f')} ms, "
              f"broker CPU {fmt_range([r.cpu_us for r in rs], '.1f')} us/request")
    watched = statistics.median(r.rate for r in results["watched"])
    unwatched = statistics.median(r.rate for r in results["unwatched"])
    print(f"watched / unwatched requests/s: {watched / unwatched:.3f} (goal >= 0.95)")


if __name__ == "__main__":
    main()
