"""Where ``MiniKafka`` used to live; it is :mod:`minikafka.testkit` now.

Kept so that ``from minikafka.testing import MiniKafka`` in users' tests goes on working.
"""

from minikafka.testkit.in_process import Faults, MiniKafka, Record, scratch_dir

__all__ = ["Faults", "MiniKafka", "Record", "scratch_dir"]
