"""A producer that writes at a steady pace until told to stop, reporting every acknowledgement.

Run by bench/replication.py in a process of its own, so the broker's event loop in the bench
process and this producer's delivery callbacks never share a GIL:

    python -m bench._steady_producer BOOTSTRAP TOPIC INTERVAL_MS VALUE_SIZE

Each record's key is its sequence number. One line per event on stdout, times from
``time.monotonic()`` (CLOCK_MONOTONIC, the same clock in every process of the machine)::

    ack <seq> <sent> <acked>
    err <seq> <error>
    done <produced> <undelivered>

A line on stdin (or its end) stops the producer; it then flushes what is queued.
"""

from __future__ import annotations

import os
import selectors
import sys
import time
from typing import Any

from confluent_kafka import Producer

#: librdkafka's defaults otherwise (retries, backoffs, metadata refresh): what a user gets.
CONFIG: dict[str, Any] = {"acks": "all", "enable.idempotence": True, "linger.ms": 0}


def main() -> None:
    bootstrap, topic, interval_ms, value_size = sys.argv[1], sys.argv[2], float(sys.argv[3]), int(sys.argv[4])
    producer = Producer({**CONFIG, "bootstrap.servers": bootstrap})
    padding = os.urandom(value_size)
    sent_at: dict[int, float] = {}
    out = sys.stdout

    def on_delivery(err: Any, msg: Any) -> None:
        seq = int(msg.key())
        if err is None:
            out.write(f"ack {seq} {sent_at.pop(seq):.6f} {time.monotonic():.6f}\n")
        else:
            sent_at.pop(seq, None)
            out.write(f"err {seq} {err}\n")
        out.flush()

    stdin = selectors.DefaultSelector()
    stdin.register(sys.stdin, selectors.EVENT_READ)
    seq = 0
    next_send = time.monotonic()
    while not stdin.select(0):
        now = time.monotonic()
        if now >= next_send:
            sent_at[seq] = now
            producer.produce(topic, key=str(seq).encode(), value=padding, on_delivery=on_delivery)
            seq += 1
            next_send += interval_ms / 1000
            if next_send < now:  # fell behind (a stall): keep the pace from here, no burst
                next_send = now
        producer.poll(max(0.0, next_send - time.monotonic()))
    left = producer.flush(120)
    out.write(f"done {seq} {left}\n")
    out.flush()


if __name__ == "__main__":
    main()
