"""The audit's verdict as it is recorded in a run and read back.

A verdict lists every leak (one kind of private identifier, first found in one place an
actor could read), the information an actor wrote itself (a date, the benchmark's name:
never failing) and the attempts that could not be verified; it is clean exactly when it
lists no leak and nothing unverifiable. Its model is `records/audit_verdict.py`: an
audit writes only its current version, and `RUN/audit.json` of any version is read as
that one (`records/upgrade.py`).
"""

from __future__ import annotations

import json
from pathlib import Path

from mailroom.mailbox.publish import publish_json
from mailroom.mailbox.schemas import schema_errors
from mailroom.orchestrator.records.audit_verdict import AUDIT_SCHEMA, AuditVerdict, Information
from mailroom.orchestrator.records.layout import RunPaths
from mailroom.orchestrator.records.run_directory import RunDirectory
from mailroom.orchestrator.records.upgrade import RecordRefusedError, upgrade_verdict

__all__ = [
    "AUDIT_SCHEMA",
    "AuditError",
    "AuditVerdict",
    "Information",
    "read_verdict",
    "record_verdict",
]


class AuditError(Exception):
    """The run cannot be audited; the message is meant for people."""


def record_verdict(run: RunDirectory, verdict: AuditVerdict) -> None:
    """`RUN/audit.json` (the latest audit, written atomically) and an `audited` event."""
    document = verdict.document()
    errors = schema_errors(AUDIT_SCHEMA, document)
    if errors:
        raise ValueError(f"audit verdict does not match {AUDIT_SCHEMA}: {errors[0]}")
    publish_json(run.paths.audit, document)
    run.event(
        "audited",
        clean=verdict.clean,
        leaks=len(verdict.leaks),
        unverifiable=len(verdict.unverifiable),
        information=len(verdict.information or []),
    )


def read_verdict(run_dir: Path) -> AuditVerdict | None:
    """The run's latest recorded verdict, of whichever version its audit wrote, as the
    current one; None when the run was never audited. A file that is no verdict is an
    `AuditError`."""
    path = RunPaths(run_dir).audit
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise AuditError(f"cannot read {path}: {exc.strerror or exc}") from exc
    try:
        document = json.loads(raw)
    except ValueError as exc:
        raise AuditError(f"{path} is not JSON: {exc}") from exc
    try:
        return upgrade_verdict(document)
    except RecordRefusedError as exc:
        raise AuditError(f"{path} {exc}") from exc
