"""The blinding audit: search everything an actor of a run could read for private names.

Per attempt, an actor could read every name and file under its endpoint directory, the
endpoint's own path, the rendered instructions it was handed, and its own argv and
environment. All of that is HANDED to it except what it wrote itself: names and files
under `inbox/` and `scratch/`, and anything else under the endpoint that is not under
`outbox/` (the orchestrator publishes nothing elsewhere). Here each attempt of a run is
audited and the run's verdict made. What counts as private, how it is found in a text
and how a find is judged by where it comes from is `patterns.py`; what is read of an
attempt's records is `recorded_attempt.py`, the walk of its endpoint `endpoint_walk.py`,
each find kept by `findings.py`; the verdict (every find says where it came from; a
date or the benchmark's name an actor wrote itself is information, never a leak) is
`records/audit_verdict.py`, its record in the run and its reading back `verdict.py`.
"""

from __future__ import annotations

from pathlib import Path

from mailroom.orchestrator.audit.endpoint_walk import scan_endpoint
from mailroom.orchestrator.audit.findings import AttemptScan, Findings
from mailroom.orchestrator.audit.patterns import Identifiers, run_identifiers
from mailroom.orchestrator.audit.recorded_attempt import (
    RecordedAttempt,
    actor_started,
    argv_text,
    env_text,
    instruction_of,
    locate_attempt,
    provider_web_searches,
    read_json,
)
from mailroom.orchestrator.audit.verdict import AuditError, AuditVerdict, record_verdict
from mailroom.orchestrator.catalog.plans import PlanError
from mailroom.orchestrator.families.kept import pin_run_catalog
from mailroom.orchestrator.families.plans import parse_plan
from mailroom.orchestrator.records.layout import LAUNCH_MESSAGE_FILE, AttemptPaths
from mailroom.orchestrator.records.run_directory import RunDirectory, not_a_run_directory
from mailroom.timestamps import utc_timestamp

ENDPOINT_PATH = "endpoint"  # where a find in the endpoint's own path is reported


class NotARunDirectoryError(AuditError):
    """The directory holds no run manifest."""


def _audit_attempt(attempt: RecordedAttempt, identifiers: Identifiers, findings: Findings) -> None:
    record = attempt.record
    scan = AttemptScan(record.attempt_id, identifiers, instruction_of(attempt.case), findings)
    launch = AttemptPaths(record.directory).launch_message
    try:
        instructions = read_json(launch)["instructions"]
        scan.text("instructions", str(instructions), source="handed")
    except FileNotFoundError:
        if attempt.endpoint is not None:
            findings.cannot_verify(record.attempt_id, f"no {LAUNCH_MESSAGE_FILE} recorded")
    except (OSError, ValueError, KeyError, TypeError) as exc:
        findings.cannot_verify(record.attempt_id, f"{LAUNCH_MESSAGE_FILE} is unreadable: {exc}")
    started = actor_started(record.directory)
    if started is not None:
        scan.text("argv", argv_text(started), source="handed")
        env = env_text(started, attempt.endpoint)
        if env is not None:
            scan.text("env", env, source="handed")
    searched = provider_web_searches(AttemptPaths(record.directory).provider_requests)
    if searched:
        findings.cannot_verify(
            record.attempt_id,
            f"blinding risk: its model provider ran {searched} server-side tool use(s) "
            "(web search) for the actor, as the gateway metered them: what it read there "
            "cannot be checked",
        )
    handed_out = launch.exists() or started is not None
    if attempt.problem is not None and (handed_out or attempt.mapped):
        findings.cannot_verify(record.attempt_id, attempt.problem)
    elif attempt.endpoint is not None:
        # The path itself is handed (in the instructions, or as an external actor's
        # launch message, or its working folder), whatever else was.
        scan.text(ENDPOINT_PATH, str(attempt.endpoint), source="handed")
        if attempt.endpoint.is_dir() and not attempt.endpoint.is_symlink():
            scan_endpoint(scan, attempt.endpoint)
        else:
            findings.cannot_verify(
                record.attempt_id,
                f"endpoint directory {attempt.endpoint} no longer exists: "
                "what its actor could read cannot be checked",
            )


def scan_run(run_dir: Path) -> AuditVerdict:
    """Audit every attempt of the run at `run_dir`; nothing is written."""
    run = RunDirectory(run_dir)
    if not run.exists():
        raise NotARunDirectoryError(not_a_run_directory(run_dir))
    try:
        manifest = run.read_manifest()
        plan = parse_plan(run.plan_path.read_bytes(), check_catalog=False)
        pin_run_catalog(run_dir)  # the run's cases as it ran them, whatever a copy holds
    except (OSError, ValueError, PlanError) as exc:
        raise AuditError(f"cannot read the run's manifest and plan: {exc}") from exc
    run_id = str(manifest.get("run_id") or run_dir.resolve().name)
    plan_cases = {c.case_id: c for c in plan.to_cases()}
    records = run.attempts()
    attempts = [locate_attempt(r, plan_cases) for r in records]
    cases = list(plan_cases.values()) + [a.case for a in attempts if a.case is not None]
    case_ids = set(plan_cases) | {r.case_id for r in records}
    volatile = manifest.get("volatile")
    identifiers = run_identifiers(
        run_id=run_id,
        run_dir=run_dir,
        cases=cases,
        case_ids=case_ids,
        created_at=volatile.get("created_at") if isinstance(volatile, dict) else None,
    )
    findings = Findings()
    for attempt in attempts:
        _audit_attempt(attempt, identifiers, findings)
    leaks = sorted(findings.leaks.values(), key=lambda x: (x.attempt_id, x.where))
    information = sorted(findings.information.values(), key=lambda x: (x.attempt_id, x.where))
    return AuditVerdict(
        run_id=run_id,
        audited_at=utc_timestamp(),
        attempts_scanned=len(attempts),
        files_scanned=findings.files,
        unverifiable=findings.unverifiable,
        leaks=leaks,
        information=information,
        clean=not leaks and not findings.unverifiable,
    )


def audit_run(run_dir: Path) -> AuditVerdict:
    """Scan the run and record the verdict in it."""
    verdict = scan_run(run_dir)
    record_verdict(RunDirectory(run_dir), verdict)
    return verdict
