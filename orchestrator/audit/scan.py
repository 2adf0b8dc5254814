"""The blinding audit: search everything an actor of a run could read for private names.

Per attempt, an actor could read every name and file under its endpoint directory (what
the orchestrator published and what the actor wrote itself), the rendered instructions
it was handed, and its own argv and environment. What counts as private, and how it is
found in a text, is `patterns.py`; here is where an actor could have read it, and the
verdict.
"""

from __future__ import annotations

import ast
import json
import os
import re
import stat
import zlib
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, Any, Literal

from mailroom.mailbox.publish import publish_json
from mailroom.mailbox.schemas import schema_errors
from mailroom.orchestrator.actors.process import scrubbed_environment
from mailroom.orchestrator.audit.patterns import (
    MAX_EXCERPT,
    IdentifierKind,
    Identifiers,
    build_identifiers,
)
from mailroom.orchestrator.campaign.run_directory import AttemptRecord, RunDirectory
from mailroom.orchestrator.catalog.cases import Case
from mailroom.orchestrator.catalog.frozen import CatalogError, catalog_entry
from mailroom.orchestrator.catalog.plans import PlanError, parse_plan
from mailroom.orchestrator.episode.evidence import EVENTS_FILE
from mailroom.timestamps import utc_timestamp
from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

AUDIT_SCHEMA: Literal["mailroom.audit/v1"] = "mailroom.audit/v1"
AUDIT_FILE = "audit.json"

MAX_WHERE = 1000
MAX_REASON = 500
CHUNK_BYTES = 1 << 20
CHUNK_OVERLAP = 4096  # longer than any identifier with its context
MAX_PNG_TEXT = 1 << 20
PNG_MAGIC = b"\x89PNG\r\n\x1a\n"
MAX_SCAN_DEPTH = 64  # folders under an endpoint; deeper is unverifiable
_ARGV_IN_REPR = re.compile(r"argv=(\[.*\])\)\s*$", re.DOTALL)


class AuditError(Exception):
    """The run cannot be audited; the message is meant for people."""


class NotARunDirectoryError(AuditError):
    """The directory holds no run manifest."""


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


AttemptId = Annotated[str, Field(min_length=1, max_length=300)]


class Leak(_Strict):
    attempt_id: AttemptId
    where: Annotated[str, Field(min_length=1, max_length=MAX_WHERE)]
    identifier_kind: IdentifierKind
    excerpt: Annotated[str, Field(max_length=MAX_EXCERPT)]


class Unverifiable(_Strict):
    attempt_id: AttemptId
    reason: Annotated[str, Field(min_length=1, max_length=MAX_REASON)]


class AuditVerdict(_Strict):
    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True)

    schema_: Literal["mailroom.audit/v1"] = Field(default=AUDIT_SCHEMA, alias="schema")
    run_id: Annotated[str, Field(min_length=1)]
    audited_at: str
    attempts_scanned: Annotated[int, Field(ge=0)]
    files_scanned: Annotated[int, Field(ge=0)]
    unverifiable: list[Unverifiable]
    leaks: list[Leak]
    clean: bool

    @model_validator(mode="after")
    def _clean_means_nothing_found(self) -> AuditVerdict:
        if self.clean != (not self.leaks and not self.unverifiable):
            raise ValueError("clean is true exactly when nothing leaked or was unverifiable")
        return self

    def document(self) -> dict[str, Any]:
        return self.model_dump(mode="json", by_alias=True)


# --- what an actor could read ----------------------------------------------------------


@dataclass
class _Findings:
    leaks: dict[tuple[str, str, IdentifierKind], Leak] = field(default_factory=dict)
    unverifiable: list[Unverifiable] = field(default_factory=list)
    files: int = 0

    def leak(self, attempt_id: str, where: str, kind: IdentifierKind, text: str) -> None:
        key = (attempt_id, where, kind)
        if key not in self.leaks:
            self.leaks[key] = Leak(
                attempt_id=attempt_id[:300],
                where=where[:MAX_WHERE],
                identifier_kind=kind,
                excerpt=text,
            )

    def cannot_verify(self, attempt_id: str, reason: str) -> None:
        self.unverifiable.append(Unverifiable(attempt_id=attempt_id[:300], reason=reason[:500]))


@dataclass(frozen=True)
class _Scan:
    attempt_id: str
    identifiers: Identifiers
    instruction: str | None
    findings: _Findings

    def text(self, where: str, text: str, *, actor_written: bool) -> None:
        for kind, shown in self.identifiers.find(
            text, instruction=self.instruction, actor_written=actor_written
        ):
            self.findings.leak(self.attempt_id, where, kind, shown)


def _chunks(fd: int) -> Iterator[str]:
    """A file as overlapping text chunks: bounded memory, no identifier split unseen."""
    tail = b""
    while data := os.read(fd, CHUNK_BYTES):
        block = tail + data
        yield block.decode("utf-8", errors="replace")
        tail = block[-CHUNK_OVERLAP:]


def _png_text(fd: int) -> str:
    """The text chunks of a PNG (tEXt, iTXt, zTXt); pixel data is never read."""
    texts: list[bytes] = []
    offset, total = len(PNG_MAGIC), 0
    while total < MAX_PNG_TEXT:
        header = os.pread(fd, 8, offset)
        if len(header) < 8:
            break
        length, kind = int.from_bytes(header[:4], "big"), header[4:]
        if kind in (b"tEXt", b"iTXt", b"zTXt"):
            body = os.pread(fd, min(length, MAX_PNG_TEXT - total), offset + 8)
            if kind == b"zTXt":
                keyword, _, rest = body.partition(b"\0")
                try:
                    inflated = zlib.decompressobj().decompress(rest[1:], MAX_PNG_TEXT)
                except zlib.error:
                    inflated = rest  # searched as it is
                body = keyword + b" " + inflated
            texts.append(body.replace(b"\0", b" "))
            total += len(body)
        if kind == b"IEND":
            break
        offset += 12 + length
    return "\n".join(t.decode("utf-8", errors="replace") for t in texts)


def _scan_file(scan: _Scan, dir_fd: int, name: str, where: str, actor_written: bool) -> None:
    flags = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
    fd = os.open(name, flags, dir_fd=dir_fd)
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return  # replaced by something else since it was listed: its name was seen
        if os.pread(fd, len(PNG_MAGIC), 0) == PNG_MAGIC:
            scan.text(where, _png_text(fd), actor_written=actor_written)
            return
        for chunk in _chunks(fd):
            scan.text(where, chunk, actor_written=actor_written)
    finally:
        os.close(fd)


def shown_name(name: str) -> str:
    """A file name as text that is always valid UTF-8 (an actor may write any bytes)."""
    return os.fsencode(name).decode("utf-8", errors="backslashreplace")


_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC


def _scan_endpoint(scan: _Scan, root: Path) -> None:
    """Every name under the endpoint, and every file's text; symlinks are never followed.

    The walk goes from folder descriptor to folder descriptor, so no path length limits
    it (only a depth cap, past which the attempt is unverifiable), and names are shown
    escaped, so no name an actor chose can break the record.
    """
    try:
        top = os.open(root, _DIR_FLAGS)
    except OSError as exc:
        scan.findings.cannot_verify(scan.attempt_id, f"cannot open the endpoint: {exc.strerror}")
        return
    _scan_folder(scan, top, "", 0)


def _scan_folder(scan: _Scan, dir_fd: int, relative: str, depth: int) -> None:
    """One folder (its descriptor is closed here), then each subfolder, depth first."""
    try:
        try:
            with os.scandir(dir_fd) as listing:
                entries = sorted(listing, key=lambda e: e.name)
        except OSError as exc:
            scan.findings.cannot_verify(
                scan.attempt_id, f"cannot list {relative or '.'}: {exc.strerror or exc}"
            )
            return
        for entry in entries:
            shown = shown_name(entry.name)
            where = f"{relative}/{shown}" if relative else shown
            actor_written = where.split("/", 1)[0] != "outbox"
            scan.text(where, shown, actor_written=actor_written)
            try:
                if entry.is_dir(follow_symlinks=False):
                    if depth + 1 > MAX_SCAN_DEPTH:
                        scan.findings.cannot_verify(
                            scan.attempt_id, f"folders nested deeper than {MAX_SCAN_DEPTH}"
                        )
                        continue
                    child = os.open(entry.name, _DIR_FLAGS, dir_fd=dir_fd)
                    _scan_folder(scan, child, where, depth + 1)
                    continue
                scan.findings.files += 1
                if entry.is_symlink():
                    target = os.readlink(entry.name, dir_fd=dir_fd)
                    scan.text(where, shown_name(target), actor_written=actor_written)
                elif entry.is_file(follow_symlinks=False):
                    _scan_file(scan, dir_fd, entry.name, where, actor_written)
            except OSError as exc:
                scan.findings.cannot_verify(
                    scan.attempt_id, f"cannot read {where}: {exc.strerror or exc}"
                )
    finally:
        os.close(dir_fd)


def _read_json(path: Path) -> Any:
    return json.loads(path.read_text(encoding="utf-8"))


def _actor_started(directory: Path) -> dict[str, Any] | None:
    path = directory / EVENTS_FILE
    if not path.exists():
        return None
    for line in path.read_text(encoding="utf-8", errors="replace").splitlines():
        if '"actor_started"' not in line:
            continue
        try:
            event = json.loads(line)
        except ValueError:
            continue
        if isinstance(event, dict) and event.get("event") == "actor_started":
            return event
    return None


def _argv_text(event: dict[str, Any]) -> str:
    """The actor's argv: structured if recorded so, else parsed from the process repr.

    An unparseable repr is searched whole: the actor may have seen any of it.
    """
    argv = event.get("argv")
    if not (isinstance(argv, list) and all(isinstance(a, str) for a in argv)):
        detail = str(event.get("detail", ""))
        match = _ARGV_IN_REPR.search(detail)
        try:
            argv = ast.literal_eval(match.group(1)) if match else None
        except (ValueError, SyntaxError):
            argv = None
        if not (isinstance(argv, list) and all(isinstance(a, str) for a in argv)):
            return detail
    return "\n".join(argv)


def _env_text(event: dict[str, Any], endpoint: Path | None) -> str | None:
    env = event.get("env")
    if isinstance(env, dict):
        return "\n".join(f"{k}={v}" for k, v in sorted(env.items()))
    if endpoint is None:
        return None
    scrubbed = scrubbed_environment(endpoint / "scratch")  # what actor_process gives
    return "\n".join(f"{k}={v}" for k, v in sorted(scrubbed.items()))


@dataclass(frozen=True)
class _Attempt:
    record: AttemptRecord
    case: Case | None
    endpoint: Path | None
    problem: str | None
    # The mapping is written before any instructions exist: without it and without a
    # launch message or an actor, nothing of this attempt was ever handed to anyone.
    mapped: bool = True


def _locate(record: AttemptRecord, plan_cases: dict[str, Case]) -> _Attempt:
    mapping = record.directory / "endpoint.json"
    case = plan_cases.get(record.case_id)
    if not mapping.exists():
        return _Attempt(
            record, case, None, "no endpoint.json: its endpoint cannot be located", mapped=False
        )
    try:
        document = _read_json(mapping)
        endpoint = Path(document["endpoint"])
        case = Case.model_validate(document["case"])
    except (OSError, ValueError, KeyError, TypeError, ValidationError) as exc:
        return _Attempt(record, case, None, f"endpoint.json is unreadable: {exc}")
    return _Attempt(record, case, endpoint, None)


def _instruction_of(case: Case | None) -> str | None:
    if case is None:
        return None
    try:
        return catalog_entry(case.suite, case.task_index).instruction
    except CatalogError:
        return None


def _audit_attempt(attempt: _Attempt, identifiers: Identifiers, findings: _Findings) -> None:
    record = attempt.record
    scan = _Scan(record.attempt_id, identifiers, _instruction_of(attempt.case), findings)
    launch = record.directory / "launch_message.json"
    try:
        instructions = _read_json(launch)["instructions"]
        scan.text("instructions", str(instructions), actor_written=False)
    except FileNotFoundError:
        if attempt.endpoint is not None:
            findings.cannot_verify(record.attempt_id, "no launch_message.json recorded")
    except (OSError, ValueError, KeyError, TypeError) as exc:
        findings.cannot_verify(record.attempt_id, f"launch_message.json is unreadable: {exc}")
    started = _actor_started(record.directory)
    if started is not None:
        scan.text("argv", _argv_text(started), actor_written=False)
        env = _env_text(started, attempt.endpoint)
        if env is not None:
            scan.text("env", env, actor_written=False)
    handed_out = launch.exists() or started is not None
    if attempt.problem is not None and (handed_out or attempt.mapped):
        findings.cannot_verify(record.attempt_id, attempt.problem)
    elif attempt.endpoint is not None:
        if attempt.endpoint.is_dir() and not attempt.endpoint.is_symlink():
            _scan_endpoint(scan, attempt.endpoint)
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
        raise NotARunDirectoryError(f"{run_dir} holds no manifest.json: not a run directory")
    try:
        manifest = run.read_manifest()
        plan = parse_plan(run.plan_path.read_bytes(), check_catalog=False)
    except (OSError, ValueError, PlanError) as exc:
        raise AuditError(f"cannot read the run's manifest and plan: {exc}") from exc
    run_id = str(manifest.get("run_id") or run_dir.resolve().name)
    plan_cases = {c.case_id: c for c in plan.to_cases()}
    records = run.attempts()
    attempts = [_locate(r, plan_cases) for r in records]
    cases = list(plan_cases.values()) + [a.case for a in attempts if a.case is not None]
    case_ids = set(plan_cases) | {r.case_id for r in records}
    volatile = manifest.get("volatile")
    run_names: dict[IdentifierKind, str] = {"run_id": run_id}
    if run_dir.resolve().name.lower() != run_id.lower():
        run_names["run_directory"] = run_dir.resolve().name
    identifiers = build_identifiers(
        run_names=run_names,
        cases=cases,
        case_ids=case_ids,
        created_at=volatile.get("created_at") if isinstance(volatile, dict) else None,
    )
    findings = _Findings()
    for attempt in attempts:
        _audit_attempt(attempt, identifiers, findings)
    leaks = sorted(findings.leaks.values(), key=lambda x: (x.attempt_id, x.where))
    return AuditVerdict(
        run_id=run_id,
        audited_at=utc_timestamp(),
        attempts_scanned=len(attempts),
        files_scanned=findings.files,
        unverifiable=findings.unverifiable,
        leaks=leaks,
        clean=not leaks and not findings.unverifiable,
    )


def record_verdict(run: RunDirectory, verdict: AuditVerdict) -> None:
    """`RUN/audit.json` (the latest audit, written atomically) and an `audited` event."""
    document = verdict.document()
    errors = schema_errors(AUDIT_SCHEMA, document)
    if errors:
        raise ValueError(f"audit verdict does not match {AUDIT_SCHEMA}: {errors[0]}")
    publish_json(run.root / AUDIT_FILE, document)
    run.event(
        "audited",
        clean=verdict.clean,
        leaks=len(verdict.leaks),
        unverifiable=len(verdict.unverifiable),
    )


def audit_run(run_dir: Path) -> AuditVerdict:
    """Scan the run and record the verdict in it."""
    verdict = scan_run(run_dir)
    record_verdict(RunDirectory(run_dir), verdict)
    return verdict
