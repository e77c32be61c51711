"""minikafka's storage: Kafka-format partition logs, producer state and snapshots.

The broker's handlers talk to storage through two objects:

* :class:`~minikafka.storage.log_manager.LogManager` owns the data dir: ``meta.properties``,
  the clean-shutdown marker, checkpoint files, the topic catalogue, and one
  :class:`~minikafka.storage.log.PartitionLog` per partition.
* :class:`~minikafka.storage.log.PartitionLog` owns one partition directory: segments
  (``.log``/``.index``/``.timeindex``), its :class:`ProducerStateManager`, and snapshots.
  docs/architecture.md#the-partition-logs-modules lists the modules around it.

Record batches are handled by their 61-byte header only (:mod:`minikafka.storage.batch`).
"""

from minikafka._kafka_codec import quiet_kafka_imports

# The storage modules read and write record batches with kafka.record; loaded here, before any
# of them, inside the scope that hides the warnings kafka-python emits while it loads.
with quiet_kafka_imports():
    import kafka.record  # noqa: F401
