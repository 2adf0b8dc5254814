"""The package lists, in one place: which distributions a run's manifest records, which of
them decide what the simulator computes (replay's drift check), and which installed
modules an actor must never see (the sandbox's deny list). Each family declares its own
(`BenchmarkFamily.packages`); the evaluator's own are added here."""

from __future__ import annotations

from mailroom.orchestrator.families.base import Packages
from mailroom.orchestrator.families.registry import all_packages

# What the evaluator itself computes, renders and records with, whatever the benchmark.
EVALUATOR_PACKAGES = Packages(
    recorded=("numpy", "pillow", "fpng", "watchdog", "pydantic", "jsonschema", "av", "pyarrow"),
    simulation=("numpy", "fpng", "pillow"),
    modules=("mailroom",),
)


def _with_evaluator(part: str) -> tuple[str, ...]:
    declared = getattr(all_packages(), part) + getattr(EVALUATOR_PACKAGES, part)
    return tuple(dict.fromkeys(declared))


def recorded_packages() -> tuple[str, ...]:
    """The distributions whose versions a run's manifest records."""
    return _with_evaluator("recorded")


def simulation_packages() -> tuple[str, ...]:
    """The recorded distributions whose versions decide what the simulator computes."""
    return _with_evaluator("simulation")


def recorded_since() -> tuple[str, ...]:
    """Distributions manifests recorded only from some point on: an older manifest's
    silence about one is no drift."""
    return _with_evaluator("recorded_since")


def private_modules() -> tuple[str, ...]:
    """Import names whose installed folders an actor must never see."""
    return _with_evaluator("modules")
