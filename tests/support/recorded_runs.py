"""Run directories as a launch with external actors leaves them, written here without a
launch: the manifest, plan and launch event (`make_run`), then any attempt's result
(`write_result`), or a result per case at once (`run_with_outcomes`)."""

from __future__ import annotations

import json
from pathlib import Path

from mailroom.benchmarks.libero.catalog import load_catalog
from mailroom.mailbox.schemas import schema_errors
from mailroom.orchestrator.catalog.cases import Case
from mailroom.orchestrator.catalog.plans import PlanKind, render_plan
from mailroom.orchestrator.episode.runner import settings_record
from mailroom.orchestrator.episode.settings import RunSettings
from mailroom.orchestrator.families.plans import build_plan
from mailroom.orchestrator.records.confinement import ConfinementRecord
from mailroom.orchestrator.records.result import (
    RESULT_SCHEMA,
    CaseRecord,
    Counters,
    Enforcement,
    EpisodeResult,
    Latency,
    Outcome,
    ResultSimulator,
    Termination,
    TypedError,
    Usage,
)
from mailroom.orchestrator.records.run_directory import RunDirectory
from run_manifests import external_manifest


def make_run(
    tmp_path: Path, *, proprio: bool, kind: PlanKind = "fast", run_id: str = "run-export-test"
) -> tuple[RunDirectory, list[Case]]:
    """A run directory of `kind`'s plan, as a launch with external actors leaves it."""
    plan = build_plan(kind)
    run = RunDirectory(tmp_path / "run")
    manifest = external_manifest(
        tmp_path, RunSettings(proprio=proprio), plan=plan, run_id=run_id, record="full"
    )
    run.write_manifest(manifest)
    run.plan_path.write_bytes(render_plan(plan))
    run.event("launched", volatile=manifest["volatile"])
    return run, plan.to_cases()


# What the kernel enforced of an external actor: nothing (it was not started here).
EXTERNAL_ACTOR = Enforcement.of_actor(None)


def write_result(
    run: RunDirectory,
    case: Case,
    attempt: int,
    *,
    outcome: Outcome,
    executed: int,
    proprio: bool,
    interrupted: bool = False,
    simulator: ResultSimulator = "dedicated",
    enforcement: Enforcement = EXTERNAL_ACTOR,
) -> EpisodeResult:
    entry = load_catalog().entry(case.suite, case.task_index)
    termination: Termination | None = {
        "success": "native_success",
        "failure": None,
        "error": "infrastructure_error",
    }[outcome]
    cut = TypedError(kind="interrupted", code="interrupted", message="cut", policy_call=None)
    result = EpisodeResult(
        attempt_id=case.attempt_id(attempt),
        case_id=case.case_id,
        outcome=outcome,
        termination=termination,
        truncated=outcome == "failure",
        truncation="policy_call_cap" if outcome == "failure" else None,
        counters=Counters(
            policy_calls=(executed + 4) // 5,
            action_decisions=(executed + 4) // 5,
            executed_controls=executed,
            settling_controls=10,
            first_success_control=executed if outcome == "success" else None,
            first_success_policy_call=(executed + 4) // 5 if outcome == "success" else None,
        ),
        latency=Latency(samples=1, median_ms=12.5, max_ms=12.5, total_ms=12.5),
        queue_delay=Latency.of([0.5]),
        processing=Latency.of([]),
        usage=Usage(),
        errors=[cut] if interrupted else [],
        case=CaseRecord(
            benchmark=case.benchmark,
            suite=case.suite,
            task_index=case.task_index,
            task_name=entry.task_name,
            instruction=entry.instruction,
            init_state_index=case.init_state_index,
            task_order_index=case.task_order_index,
            seed=case.seed,
            bddl_sha256="b" * 64,
            init_states_sha256="c" * 64,
            state_sha256="d" * 64,
        ),
        settings=settings_record(RunSettings(proprio=proprio), 1000, settling_controls=10),
        blinded=True,
        confinement=ConfinementRecord(mode="external", network=None),
        instructions_version="v1",
        simulator=simulator,
        enforcement=enforcement,
        started_at="2026-09-07T10:00:00.000Z",
        finished_at="2026-09-07T10:01:00.000Z",
        wall_time_s=60.0,
    )
    document = result.document()
    assert schema_errors(RESULT_SCHEMA, document) == []
    directory = run.episode_dir(result.attempt_id)
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "result.json").write_text(json.dumps(document), encoding="utf-8")
    return result


def run_with_outcomes(
    tmp_path: Path, name: str, outcomes: list[Outcome | None], kind: PlanKind = "development"
) -> tuple[RunDirectory, list[Case]]:
    """A run named `name` of `kind`'s plan (in `tmp_path/name`) whose case i has a first
    attempt of `outcomes[i]` (None, or no outcome given: unattempted)."""
    run, cases = make_run(tmp_path / name, proprio=False, kind=kind, run_id=name)
    for case, outcome in zip(cases, outcomes, strict=False):
        if outcome is not None:
            write_result(run, case, 1, outcome=outcome, executed=5, proprio=False)
    return run, cases
