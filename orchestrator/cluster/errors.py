"""The cluster executor's errors (importable without Ray)."""

from __future__ import annotations


class ClusterUnavailableError(RuntimeError):
    """The cluster cannot run this launch: Ray missing or unreachable, too few slots,
    or no worker started."""


class NodeInstallationError(RuntimeError):
    """A node's agent CLI installation is not the one the run recorded: its worker
    refuses to start there."""
