"""The test kit: what minikafka offers its users' tests on top of the broker.

Fault rules (:mod:`.faults`, :mod:`.fault_messages`, rule files in :mod:`.fault_files`), lifecycle control (:mod:`.control`: crash,
start again, roll a segment, expire producers), the HTTP admin endpoint (:mod:`.admin_http`),
the in-process broker :class:`MiniKafka` (:mod:`.in_process`), a cluster's controls
(:mod:`.cluster_control`, :mod:`.isolation`, :mod:`.cluster_admin_http`) and the in-process
cluster :class:`MiniKafkaCluster` (:mod:`.in_process_cluster`), and the pytest fixtures
(:mod:`.pytest_plugin`).

The broker knows nothing of this package (``minikafka/broker/`` imports nothing from it; a test
walks the import graph to keep it so). The kit installs itself through one narrow hook: it sets
the broker's request interceptor (:class:`~minikafka.broker.interceptor.RequestInterceptor`) and
drives the broker's public lifecycle, ``Broker.start()`` and ``Broker.stop(clean=...)``.

::

    from minikafka.testkit import MiniKafka
"""

from __future__ import annotations

from typing import Any

#: name -> module; loaded on first use, because pytest imports :mod:`.pytest_plugin` (and with it
#: this package) at start-up, before warnings filters apply and in every run that never starts a broker
_EXPORTS = {
    "FaultRule": "minikafka.testkit.faults",
    "FaultFileRuleError": "minikafka.testkit.fault_files",
    "FaultRuleError": "minikafka.testkit.faults",
    "Faults": "minikafka.testkit.in_process",
    "load_rules": "minikafka.testkit.fault_files",
    "MiniKafka": "minikafka.testkit.in_process",
    "MiniKafkaCluster": "minikafka.testkit.in_process_cluster",
    "Record": "minikafka.testkit.in_process",
    "scratch_dir": "minikafka.testkit.in_process",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    import importlib

    return getattr(importlib.import_module(module), name)
