"""The cluster executor's one error a command reports (importable without Ray)."""

from __future__ import annotations


class ClusterUnavailableError(RuntimeError):
    """The cluster cannot run this launch: Ray missing or unreachable, too few slots,
    or no worker started."""
