"""Consumer groups: Kafka's classic group protocol and durable committed offsets.

:class:`GroupCoordinator` (in :mod:`.coordinator`) is the state machine; it owns the committed
offsets (:mod:`.offsets`) and group administration (:mod:`.admin`), which share its
:mod:`.table` of groups; :mod:`.group` holds a group's members and generation;
:mod:`.offset_store` keeps committed offsets and group metadata in the internal log
``__consumer_offsets`` with Kafka's record schemas (:mod:`.records`).
"""

from minikafka.broker.groups.coordinator import GroupCoordinator

__all__ = ["GroupCoordinator"]
