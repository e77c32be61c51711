"""Small requests: what one Produce request costs the broker, against librdkafka's mock broker.

Real producers in tests and services mostly send small batches, and there the broker's cost per
request decides throughput and latency. This load generator sends pipelined 1-record idempotent
Produce requests (``--value-size`` bytes, acks=-1): ``--connections`` connections, each keeping
``--in-flight`` requests in flight to a topic of its own (one partition), all frames built before
the clock starts. Answers are read in bulk and checked (correlation ids in order, error code 0).
It reports requests/s, the client-seen latency (p50/p99, from writing a request to reading its
answer) and the broker's CPU time per request (user + system, from /proc/<pid>/stat of the
broker process).

Two peers, each in its own process: ``minikafka serve`` and librdkafka's mock broker (C, records
kept in memory; see bench/_mock.py). Rounds alternate between them; medians and ranges are
printed with the ratios. The machine is shared: compare the two within a run, not across runs.

    .venv/bin/python -m bench.reqrate [--connections 4] [--in-flight 5] [--requests 10000] [--rounds 3]
"""

from __future__ import annotations

import argparse
import os
import selectors
import socket
import statistics
import struct
import time
from dataclasses import dataclass, field
from typing import Any

from kafka.protocol.metadata import MetadataRequest
from kafka.protocol.producer import InitProducerIdRequest, ProduceRequest

from bench._mock import mock_broker
from bench._serve import cpu_seconds, serve
from bench.load import record_batch

_SIZE = struct.Struct(">i")
_CORRELATION_AND_ERROR = struct.Struct(">i")
_ERROR = struct.Struct(">h")


def call(sock: socket.socket, request: Any, correlation_id: int) -> Any:
    """One request/answer on a blocking socket (setup only)."""
    request.with_header(correlation_id=correlation_id, client_id="reqrate")
    sock.sendall(bytes(request.encode(framed=True, header=True)))
    data = recv_exact(sock, _SIZE.unpack(recv_exact(sock, 4))[0])
    return request.header.get_response_class().decode(data, header=True)


def recv_exact(sock: socket.socket, n: int) -> bytes:
    data = bytearray()
    while len(data) < n:
        chunk = sock.recv(n - len(data))
        if not chunk:
            raise ConnectionError("broker closed the connection")
        data += chunk
    return bytes(data)


def error_offset(version: int, topic: str) -> int:
    """Where the error code sits in a single-partition Produce answer (after the size prefix)."""
    name = len(topic.encode())
    if ProduceRequest.flexible_version_q(version):
        # correlation id, header tags, topic count, compact name, partition count, partition index
        return 4 + 1 + 1 + 1 + name + 1 + 4
    return 4 + 4 + 2 + name + 4 + 4


@dataclass
class Peer:
    """One broker under test and the producers the load generator holds on it."""

    name: str
    bootstrap: str
    pid: int
    topics: list[str]
    producers: list[tuple[int, int]] = field(default_factory=list)  # (producer id, epoch) per connection
    next_sequence: list[int] = field(default_factory=list)

    @property
    def address(self) -> tuple[str, int]:
        host, _, port = self.bootstrap.rpartition(":")
        return host, int(port)


def prepare(peer: Peer) -> None:
    """Create the topics (Metadata auto-creation: the mock has no CreateTopics) and one
    idempotent producer id per connection."""
    with socket.create_connection(peer.address, timeout=30) as sock:
        deadline = time.monotonic() + 30
        while True:
            request = MetadataRequest[4](topics=[MetadataRequest[4].MetadataRequestTopic(name=t) for t in peer.topics],
                                         allow_auto_topic_creation=True)
            answer = call(sock, request, 1)
            if all(t.error_code == 0 and t.partitions for t in answer.topics):
                break
            if time.monotonic() > deadline:
                raise RuntimeError(f"{peer.name}: topics not ready: {answer}")
            time.sleep(0.1)
        for i in range(len(peer.topics)):
            answer = call(sock, InitProducerIdRequest[1](transactional_id=None, transaction_timeout_ms=-1), 2 + i)
            if answer.error_code:
                raise RuntimeError(f"{peer.name}: InitProducerId failed with error {answer.error_code}")
            peer.producers.append((answer.producer_id, answer.producer_epoch))
            peer.next_sequence.append(0)


def build_frames(peer: Peer, version: int, requests: int, value: bytes) -> list[list[bytes]]:
    """``requests`` framed Produce requests per connection, sequences continuing the last run's."""
    out = []
    R = ProduceRequest[version]
    for c, topic in enumerate(peer.topics):
        producer_id, epoch = peer.producers[c]
        first = peer.next_sequence[c]
        frames = []
        for i in range(requests):
            batch = record_batch(producer_id, epoch, first + i, [value], int(time.time() * 1000))
            request = R(transactional_id=None, acks=-1, timeout_ms=30000, topic_data=[
                R.TopicProduceData(name=topic, partition_data=[R.TopicProduceData.PartitionProduceData(
                    index=0, records=batch)])])
            request.with_header(correlation_id=i, client_id="reqrate")
            frames.append(bytes(request.encode(framed=True, header=True)))
        peer.next_sequence[c] = first + requests
        out.append(frames)
    return out


@dataclass
class RunResult:
    requests: int
    seconds: float
    broker_cpu: float
    client_cpu: float
    latencies: list[float]

    @property
    def rate(self) -> float:
        return self.requests / self.seconds

    @property
    def cpu_us(self) -> float:
        return self.broker_cpu / self.requests * 1e6

    def percentile(self, q: float) -> float:
        ordered = sorted(self.latencies)
        return ordered[min(len(ordered) - 1, int(q * len(ordered)))] * 1e3


def run_load(peer: Peer, frames: list[list[bytes]], in_flight: int, version: int) -> RunResult:
    """Send every frame, ``in_flight`` outstanding per connection; check every answer."""
    socks = []
    selector = selectors.DefaultSelector()
    per_conn = len(frames[0])
    states = []
    for c in range(len(frames)):
        sock = socket.create_connection(peer.address, timeout=30)
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        sock.setblocking(False)
        socks.append(sock)
        # next to send, next answer expected, receive buffer, send times, error code offset
        state = [0, 0, bytearray(), [0.0] * per_conn, error_offset(version, peer.topics[c])]
        states.append(state)
        selector.register(sock, selectors.EVENT_READ, c)
    latencies: list[float] = []
    total = per_conn * len(frames)
    done = 0
    unpack_size = _SIZE.unpack_from
    unpack_int = _CORRELATION_AND_ERROR.unpack_from
    unpack_error = _ERROR.unpack_from
    clock = time.perf_counter
    cpu0, client0 = cpu_seconds(peer.pid), time.process_time()
    started = clock()
    try:
        for c, sock in enumerate(socks):
            state = states[c]
            n = min(in_flight, per_conn)
            now = clock()
            for i in range(n):
                state[3][i] = now
            sock.sendall(b"".join(frames[c][:n]))
            state[0] = n
        while done < total:
            events = selector.select(30)
            if not events:
                raise RuntimeError(f"{peer.name}: no answer for 30 s ({done} of {total} answered)")
            for key, _mask in events:
                c = key.data
                sock = socks[c]
                state = states[c]
                data = sock.recv(1 << 20)
                if not data:
                    raise RuntimeError(f"{peer.name}: connection {c} closed after {state[1]} answers")
                buf = state[2]
                buf += data
                pos = 0
                now = clock()
                expected = state[1]
                sent_at = state[3]
                at_error = state[4]
                end = len(buf)
                while end - pos >= 4:
                    (size,) = unpack_size(buf, pos)
                    if end - pos - 4 < size:
                        break
                    (correlation,) = unpack_int(buf, pos + 4)
                    (error,) = unpack_error(buf, pos + at_error)
                    if correlation != expected or error:
                        raise RuntimeError(f"{peer.name}: connection {c} answer {expected}: correlation id "
                                           f"{correlation}, error code {error}")
                    latencies.append(now - sent_at[expected])
                    expected += 1
                    pos += 4 + size
                answered = expected - state[1]
                del buf[:pos]
                state[1] = expected
                done += answered
                first = state[0]
                last = min(first + answered, per_conn)
                if last > first:
                    for i in range(first, last):
                        sent_at[i] = now
                    sock.sendall(b"".join(frames[c][first:last]))
                    state[0] = last
        elapsed = clock() - started
        return RunResult(total, elapsed, cpu_seconds(peer.pid) - cpu0, time.process_time() - client0, latencies)
    finally:
        selector.close()
        for sock in socks:
            sock.close()


def fmt_range(values: list[float], spec: str) -> str:
    return f"{statistics.median(values):{spec}} ({min(values):{spec}}..{max(values):{spec}})"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--connections", type=int, default=4)
    parser.add_argument("--in-flight", type=int, default=5)
    parser.add_argument("--requests", type=int, default=10_000, help="requests per connection per round")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--value-size", type=int, default=100)
    parser.add_argument("--produce-version", type=int, default=9,
                        help="Produce version (8: the last classic one; 9: flexible; the mock serves up to 10)")
    parser.add_argument("--only", choices=("minikafka", "mock"), help="measure one peer only (for profiling)")
    args = parser.parse_args()
    value = os.urandom(args.value_size)
    names = ("minikafka", "mock") if args.only is None else (args.only,)
    with serve() as (mk_bootstrap, mk_proc, _data), mock_broker() as (mock_bootstrap, mock_proc):
        peers = {
            "minikafka": Peer("minikafka", mk_bootstrap, mk_proc.pid,
                              [f"reqrate-{c}" for c in range(args.connections)]),
            "mock": Peer("mock", mock_bootstrap, mock_proc.pid, [f"reqrate-{c}" for c in range(args.connections)]),
        }
        results: dict[str, list[RunResult]] = {name: [] for name in names}
        for name in names:
            prepare(peers[name])
            warm = build_frames(peers[name], args.produce_version, min(500, args.requests), value)
            run_load(peers[name], warm, args.in_flight, args.produce_version)
        for r in range(args.rounds):
            order = names if r % 2 == 0 else names[::-1]
            for name in order:
                peer = peers[name]
                frames = build_frames(peer, args.produce_version, args.requests, value)
                result = run_load(peer, frames, args.in_flight, args.produce_version)
                results[name].append(result)
                print(f"round {r + 1} {name:<9}: {result.rate:8.0f} requests/s  p50 {result.percentile(0.5):6.2f} ms  "
                      f"p99 {result.percentile(0.99):6.2f} ms  broker CPU {result.cpu_us:6.1f} us/request  "
                      f"client CPU {result.client_cpu / result.requests * 1e6:5.1f} us/request", flush=True)
    print(f"{args.connections} connections x {args.in_flight} in flight, {args.requests} requests each per round, "
          f"1 record of {args.value_size} B, idempotent, acks=-1, Produce v{args.produce_version}; "
          f"median (range) of {args.rounds} rounds")
    for name in names:
        rs = results[name]
        print(f"{name:<9}: {fmt_range([r.rate for r in rs], '.0f')} requests/s, "
              f"p50 {fmt_range([r.percentile(0.5) for r in rs], '.2f')} ms, "
              f"p99 {fmt_range([r.percentile(0.99) for r in rs], '.2f')} ms, "
              f"broker CPU {fmt_range([r.cpu_us for r in rs], '.1f')} us/request")
    if len(names) == 2:
        mk, mock = results["minikafka"], results["mock"]
        ratios = [a.rate / b.rate for a, b in zip(mk, mock, strict=True)]
        print(f"minikafka / mock requests/s (per round): {fmt_range(ratios, '.2f')}  (target >= 0.33)")
        print(f"minikafka broker CPU per request: {statistics.median(r.cpu_us for r in mk):.1f} us (target <= 30), "
              f"mock {statistics.median(r.cpu_us for r in mock):.1f} us")


if __name__ == "__main__":
    main()
