"""The basic reporter: success with its denominators, from result documents alone.

It needs the manifest, the plan and the result documents (plus recorded leak
disclosures); no event log. A case counts once, by its latest attempt.
"""

from __future__ import annotations

import json
from collections import defaultdict
from pathlib import Path
from typing import Annotated, Any

from mailroom.orchestrator.campaign.run_directory import CorruptResult, RunDirectory
from mailroom.orchestrator.catalog.plans import parse_plan
from mailroom.orchestrator.results.documents import SUMMED_COUNTERS, EpisodeResult
from pydantic import BaseModel, ConfigDict, Field

COUNTER_FIELDS = SUMMED_COUNTERS


class Tally(BaseModel):
    model_config = ConfigDict(extra="forbid")

    selected: int = 0
    completed: int = 0
    success: int = 0
    failure: int = 0
    errored: int = 0
    unattempted: int = 0
    not_blinded: int = 0
    # Attempts whose actor was not confined by the orchestrator's sandbox: `none`,
    # `external`, or a v1 result written before confinement was recorded.
    not_confined: int = 0
    success_rate: Annotated[float, Field(ge=0, le=1)] | None = None
    success_rate_denominator: str = "completed"
    success_over_selected: Annotated[float, Field(ge=0, le=1)] | None = None
    counters: dict[str, int] = Field(default_factory=lambda: dict.fromkeys(COUNTER_FIELDS, 0))
    provider_usage: str = "unknown (null in every result: a file mailbox cannot meter it)"

    def count(self, result: EpisodeResult | None, blinded: bool) -> None:
        if result is not None and not result.confined:
            self.not_confined += 1
        self.selected += 1
        if result is None:
            self.unattempted += 1
            return
        self.completed += 1
        if result.outcome == "success":
            self.success += 1
        elif result.outcome == "failure":
            self.failure += 1
        else:
            self.errored += 1
        if not blinded:
            self.not_blinded += 1
        for name in COUNTER_FIELDS:
            self.counters[name] += int(getattr(result.counters, name))

    def finish(self) -> None:
        self.success_rate = self.success / self.completed if self.completed else None
        self.success_over_selected = self.success / self.selected if self.selected else None


class Report(BaseModel):
    model_config = ConfigDict(extra="forbid")

    run_id: str
    profile: str
    capability_score: bool
    plan_kind: str
    complete: bool
    overall: Tally
    suites: dict[str, Tally]
    corrupt_results: list[dict[str, str]]
    superseded_attempts: list[str]
    not_blinded_attempts: list[str]
    not_confined_attempts: list[str]
    confinement_modes: dict[str, int]


def confinement_label(result: EpisodeResult) -> str:
    """How an attempt was confined, in the report's words (the host network said)."""
    record = result.confinement
    if record is None:
        return "unrecorded"  # a v1 result: its actor was not confined
    if record.mode == "sandbox" and record.network == "host":
        return "sandbox (host network)"
    return record.mode


def disclosed_attempts(run: RunDirectory) -> set[str]:
    return {e["attempt_id"] for e in run.events() if e.get("event") == "leak_disclosed"}


def build_report(run_dir: Path) -> Report:
    run = RunDirectory(run_dir)
    manifest: dict[str, Any] = run.read_manifest()
    plan = parse_plan(run.plan_path.read_bytes(), check_catalog=False)
    latest: dict[str, EpisodeResult] = {}
    attempt_of: dict[str, str] = {}
    superseded: list[str] = []
    corrupt: list[dict[str, str]] = []
    for record in run.attempts():
        if isinstance(record.result, CorruptResult):
            corrupt.append({"file": str(record.result.path), "reason": record.result.reason})
            continue
        if record.result is None:
            continue
        if record.case_id in attempt_of:
            superseded.append(attempt_of[record.case_id])
        latest[record.case_id] = record.result
        attempt_of[record.case_id] = record.attempt_id
    disclosed = disclosed_attempts(run)
    overall = Tally()
    suites: dict[str, Tally] = defaultdict(Tally)
    modes: dict[str, int] = defaultdict(int)
    not_confined: list[str] = []
    for case in plan.to_cases():
        result = latest.get(case.case_id)
        blinded = result is None or (result.blinded and attempt_of[case.case_id] not in disclosed)
        overall.count(result, blinded)
        suites[case.suite].count(result, blinded)
        if result is not None:
            modes[confinement_label(result)] += 1
            if not result.confined:
                not_confined.append(attempt_of[case.case_id])
    overall.finish()
    for tally in suites.values():
        tally.finish()
    return Report(
        run_id=str(manifest.get("run_id", run_dir.name)),
        profile=str(manifest["profile"]["name"]),
        capability_score=bool(manifest["profile"]["capability_score"]),
        plan_kind=plan.kind,
        complete=overall.unattempted == 0,
        overall=overall,
        suites=dict(suites),
        corrupt_results=corrupt,
        superseded_attempts=sorted(superseded),
        not_blinded_attempts=sorted(a for a in disclosed if a in attempt_of.values()),
        not_confined_attempts=sorted(not_confined),
        confinement_modes=dict(sorted(modes.items())),
    )


def report_json(report: Report) -> str:
    return json.dumps(report.model_dump(mode="json"), indent=2, sort_keys=True)
