"""Typed errors raised by :mod:`tubemq_aio.testing`.

Every error names its cause and, when one exists, the log file to read next.
"""

from __future__ import annotations

from pathlib import Path

__all__ = [
    "ClusterError",
    "ClusterStartError",
    "NodeNotReadyError",
    "PortConflictError",
    "PortInUseError",
    "RuntimeResolveError",
    "ToolNotFoundError",
    "UnsupportedVersionError",
    "WebApiError",
]


class ClusterError(Exception):
    """Base class of every error raised by the local TubeMQ cluster helpers.

    Attributes:
        log_file: The log file that explains the failure, if there is one.
        details: Extra text (usually the tails of the server logs) appended to the message.
    """

    def __init__(self, message: str, log_file: Path | None = None, details: str = "") -> None:
        """Build the error.

        Args:
            message: What went wrong, naming the cause.
            log_file: The log file to read for more, if any; it is named in the message.
            details: Extra text appended after the message (e.g. log tails).
        """
        self.message = message
        self.log_file = log_file
        self.details = details
        text = message
        if log_file is not None:
            text += f" (log: {log_file})"
        if details:
            text += "\n" + details
        super().__init__(text)

    def with_details(self, details: str) -> ClusterError:
        """Return a copy of this error (same type) with ``details`` attached.

        Args:
            details: Text to append, e.g. the tails of every server log.

        Returns:
            A new error of the same class.
        """
        err = type(self)(self.message, self.log_file, details)
        err.__cause__ = self.__cause__
        return err


class ToolNotFoundError(ClusterError):
    """A required program (``java`` or ``mvn``) is not installed or not executable."""


class UnsupportedVersionError(ClusterError, ValueError):
    """A tubemq-server version the harness cannot run (the message lists the ones it can)."""


class RuntimeResolveError(ClusterError):
    """Maven could not download the TubeMQ server runtime (e.g. an unknown version)."""


class PortInUseError(ClusterError):
    """A port the cluster needs is already taken by another process."""


class PortConflictError(PortInUseError):
    """A port picked as free was taken by another process before our server bound it: the
    server could not bind, or another node answers there in its place. ``LocalCluster`` retries
    its start with fresh ports (within ``start_timeout``) before raising it."""


class ClusterStartError(ClusterError):
    """A server process failed to start, exited early, or refused to register."""


class NodeNotReadyError(ClusterStartError):
    """A server (or a topic on it) did not become ready within the allowed time."""


class SparkClusterError(ClusterStartError):
    """A Spark process failed to start, exited early or did not become ready in time."""


class WebApiError(ClusterError):
    """The master's web API refused a request or an item of a batch request failed."""
