"""What a run's actors saw and sent, as the viewer lays it out: the cameras its manifest
records and its family's action layout."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from mailroom.orchestrator.catalog.plans import PlanError
from mailroom.orchestrator.families.base import UnknownBenchmarkError
from mailroom.orchestrator.families.plans import parse_plan
from mailroom.orchestrator.families.registry import family
from mailroom.orchestrator.records.run_directory import RunDirectory
from mailroom.orchestrator.sim.specs import ActionSpec


class RunShapeError(ValueError):
    """A run whose family this evaluator lacks, or whose plan cannot be read."""


@dataclass(frozen=True)
class RunShape:
    cameras: tuple[str, ...]
    action_layout: tuple[str, ...]
    action_low: float
    action_high: float

    @classmethod
    def of(cls, action: ActionSpec, cameras: Sequence[str]) -> RunShape:
        return cls(tuple(cameras), action.layout, action.low, action.high)


def run_benchmark(run: RunDirectory, manifest: dict[str, Any]) -> str:
    """The family a run's cases belong to: its manifest's, or (a manifest before v4 did
    not say) its plan's."""
    named = manifest.get("protocol", {}).get("benchmark")
    if isinstance(named, str):
        return named
    return parse_plan(run.plan_path.read_bytes(), check_catalog=False).benchmark


def run_shape(run: RunDirectory, manifest: dict[str, Any]) -> RunShape:
    """Raises `RunShapeError` for a family this evaluator lacks, or a run whose manifest
    names none and whose plan cannot be read."""
    try:
        action = family(run_benchmark(run, manifest)).action_spec
    except (UnknownBenchmarkError, PlanError, OSError) as exc:
        raise RunShapeError(f"{run.root}: {exc}") from exc
    return RunShape.of(action, [str(c) for c in manifest["protocol"]["cameras"]])
