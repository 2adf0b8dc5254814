"""Results for attempts that ended without one: interrupted runs and lost workers.

Such an attempt is kept and counted as errored, never silently re-run: its actor may
already have seen observations. Counters are rebuilt from the attempt's own event log,
which recorded each thing as it happened: a response when it was claimed, a chunk's
controls once the next observation was out (its `actions_executed` record is stamped at
the chunk's end and written then), so a chunk the crash cut short, or whose next
observation never went out, is not counted as executed.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, cast

from mailroom.orchestrator.actors.confinement import confinement_of_run
from mailroom.orchestrator.catalog.cases import Case
from mailroom.orchestrator.episode.runner import settings_record
from mailroom.orchestrator.families.registry import family
from mailroom.orchestrator.records.event_log import read_log
from mailroom.orchestrator.records.layout import AttemptPaths, split_attempt_id
from mailroom.orchestrator.records.manifest import instructions_of_run
from mailroom.orchestrator.records.result import (
    CaseRecord,
    Counters,
    Enforcement,
    EpisodeResult,
    ErrorKind,
    Latency,
    ResultSimulator,
    TypedError,
    Usage,
)
from mailroom.orchestrator.records.run_directory import CorruptResult, RunDirectory, read_result
from mailroom.timestamps import utc_timestamp


def _events(directory: Path) -> list[dict[str, Any]]:
    # A torn last line from the crash: everything before it stands.
    return read_log(AttemptPaths(directory).events).before_first_unreadable()


def counters_from_events(events: list[dict[str, Any]]) -> Counters:
    c = Counters()
    for e in events:
        kind = e.get("event")
        if kind == "episode_started":
            c.settling_controls = int(e.get("settling_controls", 0))
        elif kind == "response_claimed":
            c.policy_calls += 1
            if e.get("outcome") == "invalid":
                c.rejected_responses += 1
            elif e.get("decision") == "stop":
                c.stop_responses += 1
            elif e.get("decision") == "act":
                c.action_decisions += 1
        elif kind == "actions_executed":
            c.executed_controls = int(e.get("executed_controls_total", c.executed_controls))
    return c


def _case_record(case: Case) -> CaseRecord:
    owner = family(case.benchmark)
    identity = owner.resolve_task(case.suite, case.task_index, case.task_order_index)
    return CaseRecord.of(
        identity,
        init_state_index=case.init_state_index,
        seed=case.seed,
        state_sha256=owner.state_sha256(identity, case.init_state_index),
    )


def _case_of(run: RunDirectory, attempt_id: str) -> Case:
    mapping = run.paths.attempt(attempt_id).endpoint_mapping
    if mapping.exists():
        return Case.model_validate(json.loads(mapping.read_text(encoding="utf-8"))["case"])
    from mailroom.orchestrator.families.plans import load_plan

    parsed = split_attempt_id(attempt_id)
    for case in load_plan(run.plan_path).to_cases():
        if parsed is not None and case.case_id == parsed[0]:
            return case
    raise KeyError(f"{attempt_id} names no case of this run's plan")


def record_interrupted(
    run: RunDirectory, attempt_id: str, *, reason: str, kind: str = "interrupted"
) -> EpisodeResult:
    """Write the errored result for an attempt that has none (a corrupt one is kept aside)."""
    paths = run.paths.attempt(attempt_id)
    directory = paths.root
    directory.mkdir(parents=True, exist_ok=True)
    result_path = paths.result
    if result_path.exists():
        existing = read_result(result_path)
        if not isinstance(existing, CorruptResult):
            return existing
        result_path.replace(paths.corrupt_result)
    manifest = run.read_manifest()
    settings = manifest["settings"]
    case = _case_of(run, attempt_id)
    events = _events(directory)
    from mailroom.orchestrator.episode.settings import RunSettings
    from mailroom.orchestrator.families.registry import reference_horizon

    run_settings = RunSettings.model_validate(settings)
    error_kind: ErrorKind = "interrupted" if kind == "interrupted" else "infrastructure_error"
    now = utc_timestamp()
    started = events[0]["t"] if events else None
    result = EpisodeResult(
        attempt_id=attempt_id,
        case_id=case.case_id,
        outcome="error",
        termination="infrastructure_error",
        truncated=False,
        truncation=None,
        counters=counters_from_events(events),
        latency=Latency.of([]),
        queue_delay=Latency.of([]),
        processing=Latency.of([]),
        usage=Usage(),
        errors=[
            TypedError(
                kind=error_kind,
                code=kind,
                message=reason[:2000],
                policy_call=None,
            )
        ],
        case=_case_record(case),
        settings=settings_record(
            run_settings,
            run_settings.control_cap(reference_horizon(case.suite).controls),
            family(case.benchmark).observation_spec.settling_controls,
        ),
        blinded=True,
        confinement=confinement_of_run(manifest),
        # What the run's actors were handed, as its manifest says (v1 before versions).
        instructions_version=instructions_of_run(manifest),
        simulator=_holding_of(events),
        enforcement=Enforcement.of_actor(_actor_started(events)),
        started_at=utc_timestamp(started) if started is not None else now,
        finished_at=now,
        wall_time_s=0.0,
    )
    from mailroom.mailbox.publish import publish_json

    publish_json(result_path, result.document())
    run.event("attempt_recorded_errored", attempt_id=attempt_id, code=kind, reason=reason[:500])
    return result


def _holding_of(events: list[dict[str, Any]]) -> ResultSimulator:
    """How the attempt's simulator was held, as its `episode_started` event says: "none"
    if it never started; `dedicated` if the event is from before results said (every
    episode then had a simulator of its own)."""
    for event in events:
        if event.get("event") == "episode_started":
            held = event.get("simulator", "dedicated")
            return cast(ResultSimulator, held) if held in ("parked", "dedicated") else "none"
    return "none"


def _actor_started(events: list[dict[str, Any]]) -> dict[str, Any] | None:
    """The attempt's `actor_started` event, None if its actor was not started here."""
    for event in events:
        if event.get("event") == "actor_started":
            return event
    return None
