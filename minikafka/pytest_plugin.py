"""The name the ``pytest11`` entry point (and a user's ``-p minikafka.pytest_plugin`` or
``pytest_plugins = [...]``) loads; the fixtures live in :mod:`minikafka.testkit.pytest_plugin`.

pytest finds hooks and fixtures by the names a plugin module holds, so importing them is enough.
"""

from minikafka.testkit.pytest_plugin import (  # noqa: F401
    _minikafka_session_broker,
    minikafka,
    minikafka_cluster,
    minikafka_factory,
    minikafka_session,
    pytest_addoption,
    pytest_configure,
)
