"""Feed a confluent-kafka producer as fast as the Python side allows, for the benchmarks."""

from __future__ import annotations

from typing import Any


def produce_all(producer: Any, topic: str, chunk: list[dict[str, Any]], records: int, flush_timeout: float) -> None:
    """Queue ``records`` messages cycling through ``chunk`` (``produce_batch`` dicts) and wait for all
    of them to be delivered; raises if any was not."""
    errors: list[object] = []

    def on_delivery(err: object, _msg: object) -> None:
        if err is not None:
            errors.append(err)

    sent = 0
    while sent < records:
        batch = chunk[: records - sent]
        try:
            queued = producer.produce_batch(topic, batch, on_delivery=on_delivery)
        except BufferError:
            queued = 0
        sent += queued
        if queued < len(batch):
            producer.poll(0.005)
    left = producer.flush(flush_timeout)
    if left or errors:
        raise RuntimeError(f"{left} undelivered, errors: {errors[:3]}")
