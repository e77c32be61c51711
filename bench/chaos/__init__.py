"""Exactly-once under chaos: a workload of real clients, a nemesis and a checker of the history.

``python -m bench.chaos --seconds 60 --seed 7`` runs it against an in-process broker with the
nemesis; ``--bootstrap HOST:PORT`` against any Kafka-compatible broker without one. See
docs/chaos.md for what it covers and what it does not.
"""
