"""Checks whether this machine's simulator stack is the one a run recorded.

On another version, a divergence is drift, not tampering."""

from __future__ import annotations

from typing import Any

from mailroom.orchestrator.campaign.manifest import package_version
from mailroom.orchestrator.families.packages import (
    recorded_packages,
    recorded_since,
    simulation_packages,
)


def version_drift(manifest: dict[str, Any]) -> dict[str, list[str | None]]:
    """package -> [recorded, installed], for each that differs."""
    recorded = manifest.get("environment", {}).get("packages", {})
    recorded_now, later = set(recorded_packages()), set(recorded_since())
    drift: dict[str, list[str | None]] = {}
    for name in simulation_packages():
        if name not in recorded_now or (name in later and name not in recorded):
            continue
        installed = package_version(name)
        if recorded.get(name) != installed:
            drift[name] = [recorded.get(name), installed]
    return drift
