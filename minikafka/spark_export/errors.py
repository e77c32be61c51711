"""Exceptions of the Spark exporter, raised on the driver while planning or in a task while reading."""

from __future__ import annotations


class ExportOptionError(ValueError):
    """An option is missing, malformed or contradicts another (checked before any task runs)."""


class DataLossError(RuntimeError):
    """Data the read asked for is gone or damaged, and ``failOnDataLoss`` is true.

    The message names the segment file and byte position and says how to read past it.
    """

    HINT = (
        " Some data may have been lost because it is not available any more (deleted by retention, "
        "truncated or corrupt). Set the option failOnDataLoss to false to skip it and read the rest."
    )

    def __init__(self, message: str) -> None:
        super().__init__(message + self.HINT)


class DataDirUnreachable(RuntimeError):
    """A task cannot see the data directory the driver planned from (not shared with executors)."""
