"""The blinding audit: search everything an actor of a run could read for private names.

Per attempt, an actor could read every name and file under its endpoint directory, the
endpoint's own path, the rendered instructions it was handed, and its own argv and
environment. All of that is HANDED to it except what it wrote itself: names and files
under `inbox/` and `scratch/`, and anything else under the endpoint that is not under
`outbox/` (the orchestrator publishes nothing elsewhere). What counts as private, how it
is found in a text and how a find is judged by where it comes from is `patterns.py`;
here is where an actor could have read it, and the verdict (`mailroom.audit/v2`: every
find says where it came from; a date or the benchmark's name an actor wrote itself is
information, never a leak). A v1 verdict of an earlier audit still reads.
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

from mailroom.mailbox.held_directories import SUBDIRS
from mailroom.mailbox.messages import from_json
from mailroom.mailbox.publish import publish_json
from mailroom.mailbox.schemas import schema_errors
from mailroom.orchestrator.actors.process import scrubbed_environment
from mailroom.orchestrator.audit.patterns import (
    KNOWABLE_UNTOLD,
    MAX_EXCERPT,
    IdentifierKind,
    Identifiers,
    InformationKind,
    Source,
    information_kind,
    run_identifiers,
)
from mailroom.orchestrator.catalog.cases import Case
from mailroom.orchestrator.catalog.frozen import CatalogError
from mailroom.orchestrator.catalog.plans import PlanError
from mailroom.orchestrator.families.kept import pin_run_catalog
from mailroom.orchestrator.families.plans import parse_plan
from mailroom.orchestrator.families.registry import catalog_entry
from mailroom.orchestrator.gateway.ledger import REQUEST_EVENT as PROVIDER_REQUEST_EVENT
from mailroom.orchestrator.records.event_log import read_log
from mailroom.orchestrator.records.layout import (
    ENDPOINT_FILE,
    LAUNCH_MESSAGE_FILE,
    AttemptPaths,
    RunPaths,
)
from mailroom.orchestrator.records.result import Timestamp
from mailroom.orchestrator.records.run_directory import (
    AttemptRecord,
    RunDirectory,
    not_a_run_directory,
)
from mailroom.timestamps import utc_timestamp
from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    SerializerFunctionWrapHandler,
    ValidationError,
    model_serializer,
    model_validator,
)

AUDIT_SCHEMA_V1: Literal["mailroom.audit/v1"] = "mailroom.audit/v1"
AUDIT_SCHEMA: Literal["mailroom.audit/v2"] = "mailroom.audit/v2"
AUDIT_SCHEMAS = (AUDIT_SCHEMA_V1, AUDIT_SCHEMA)

MAX_WHERE = 1000
MAX_REASON = 500
CHUNK_BYTES = 1 << 20
CHUNK_OVERLAP = 4096  # longer than any identifier with its context
MAX_PNG_TEXT = 1 << 20
PNG_MAGIC = b"\x89PNG\r\n\x1a\n"
MAX_SCAN_DEPTH = 64  # folders under an endpoint; deeper is unverifiable
ENDPOINT_PATH = "endpoint"  # where a find in the endpoint's own path is reported
_ARGV_IN_REPR = re.compile(r"argv=(\[.*\])\)\s*$", re.DOTALL)


class AuditError(Exception):
    """The run cannot be audited; the message is meant for people."""


class NotARunDirectoryError(AuditError):
    """The directory holds no run manifest."""


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


AttemptId = Annotated[str, Field(min_length=1, max_length=300)]


Where = Annotated[str, Field(min_length=1, max_length=MAX_WHERE)]
Excerpt = Annotated[str, Field(max_length=MAX_EXCERPT)]


class Leak(_Strict):
    """One kind of private identifier, first found in one place an actor could read."""

    attempt_id: AttemptId
    where: Where
    identifier_kind: IdentifierKind
    excerpt: Excerpt
    # Every v2 leak says where its text came from; a v1 leak has no such field.
    source: Source | None = None


class Information(_Strict):
    """A date or the benchmark's name an actor wrote itself: reported, never failing."""

    attempt_id: AttemptId
    where: Where
    kind: InformationKind
    excerpt: Excerpt
    source: Literal["actor_written"]


class Unverifiable(_Strict):
    attempt_id: AttemptId
    reason: Annotated[str, Field(min_length=1, max_length=MAX_REASON)]


class AuditVerdict(_Strict):
    """A verdict as `mailroom audit` writes it (v2), or as an earlier audit wrote it (v1:
    no `information`, no leak's `source`)."""

    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True)

    # No default: on the wire, as in the frozen schemas, a verdict names its version.
    schema_: Literal["mailroom.audit/v1", "mailroom.audit/v2"] = Field(alias="schema")
    run_id: Annotated[str, Field(min_length=1)]
    audited_at: Timestamp
    attempts_scanned: Annotated[int, Field(ge=0)]
    files_scanned: Annotated[int, Field(ge=0)]
    unverifiable: list[Unverifiable]
    leaks: list[Leak]
    information: list[Information] | None = None
    clean: bool

    @model_validator(mode="after")
    def _clean_means_nothing_found(self) -> AuditVerdict:
        if self.clean != (not self.leaks and not self.unverifiable):
            raise ValueError("clean is true exactly when nothing leaked or was unverifiable")
        return self

    @model_validator(mode="after")
    def _fields_by_version(self) -> AuditVerdict:
        if self.schema_ == AUDIT_SCHEMA_V1:
            if "information" in self.model_fields_set or any(
                "source" in leak.model_fields_set for leak in self.leaks
            ):
                raise ValueError("a v1 verdict has no information and no leak source")
            return self
        if self.information is None:
            raise ValueError("a v2 verdict lists its information, if only as []")
        for leak in self.leaks:
            if leak.source is None:
                raise ValueError("every leak of a v2 verdict says where its text came from")
            if leak.source == "actor_written" and leak.identifier_kind in KNOWABLE_UNTOLD:
                raise ValueError(
                    f"a {leak.identifier_kind} an actor wrote itself is information, not a leak"
                )
        return self

    @model_serializer(mode="wrap")
    def _as_its_version(self, handler: SerializerFunctionWrapHandler) -> object:
        data = handler(self)
        if isinstance(data, dict) and self.schema_ == AUDIT_SCHEMA_V1:
            data.pop("information", None)
            for leak in data.get("leaks", []):
                if isinstance(leak, dict):
                    leak.pop("source", None)
        return data

    def document(self) -> dict[str, Any]:
        return self.model_dump(mode="json", by_alias=True)


# --- what an actor could read ----------------------------------------------------------


@dataclass
class _Findings:
    leaks: dict[tuple[str, str, Source, IdentifierKind], Leak] = field(default_factory=dict)
    information: dict[tuple[str, str, InformationKind], Information] = field(default_factory=dict)
    unverifiable: list[Unverifiable] = field(default_factory=list)
    files: int = 0

    def found(
        self, attempt_id: str, where: str, kind: IdentifierKind, text: str, source: Source
    ) -> None:
        """A leak, or information where the actor wrote what it could know untold."""
        attempt_id, where = attempt_id[:300], where[:MAX_WHERE]
        untold = information_kind(kind, source)
        if untold is not None:
            key = (attempt_id, where, untold)
            if key not in self.information:
                self.information[key] = Information(
                    attempt_id=attempt_id,
                    where=where,
                    kind=untold,
                    excerpt=text,
                    source="actor_written",
                )
        elif (attempt_id, where, source, kind) not in self.leaks:
            self.leaks[attempt_id, where, source, kind] = Leak(
                attempt_id=attempt_id,
                where=where,
                identifier_kind=kind,
                excerpt=text,
                source=source,
            )

    def cannot_verify(self, attempt_id: str, reason: str) -> None:
        self.unverifiable.append(Unverifiable(attempt_id=attempt_id[:300], reason=reason[:500]))


@dataclass(frozen=True)
class _Scan:
    attempt_id: str
    identifiers: Identifiers
    instruction: str | None
    findings: _Findings

    def text(self, where: str, text: str, *, source: Source) -> None:
        for kind, shown in self.identifiers.find(
            text, instruction=self.instruction, actor_written=source == "actor_written"
        ):
            self.findings.found(self.attempt_id, where, kind, shown, source)


def source_of(where: str) -> Source:
    """Who put a name under an endpoint there: everything under `outbox/`, and the
    endpoint's own folders, are the orchestrator's; the rest is the actor's."""
    top, slash, _ = where.partition("/")
    if top == "outbox" or (not slash and top in SUBDIRS):
        return "handed"
    return "actor_written"


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


def _scan_file(scan: _Scan, dir_fd: int, name: str, where: str, source: Source) -> None:
    flags = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
    fd = os.open(name, flags, dir_fd=dir_fd)
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return  # replaced by something else since it was listed: its name was seen
        if os.pread(fd, len(PNG_MAGIC), 0) == PNG_MAGIC:
            scan.text(where, _png_text(fd), source=source)
            return
        for chunk in _chunks(fd):
            scan.text(where, chunk, source=source)
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
            source = source_of(where)
            scan.text(where, shown, source=source)
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
                    scan.text(where, shown_name(target), source=source)
                elif entry.is_file(follow_symlinks=False):
                    _scan_file(scan, dir_fd, entry.name, where, source)
            except OSError as exc:
                scan.findings.cannot_verify(
                    scan.attempt_id, f"cannot read {where}: {exc.strerror or exc}"
                )
    finally:
        os.close(dir_fd)


def _read_json(path: Path) -> Any:
    return json.loads(path.read_text(encoding="utf-8"))


def _actor_started(directory: Path) -> dict[str, Any] | None:
    started = read_log(AttemptPaths(directory).events, kinds=("actor_started",)).records
    return started[0] if started else None


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
    mapping = AttemptPaths(record.directory).endpoint_mapping
    case = plan_cases.get(record.case_id)
    if not mapping.exists():
        return _Attempt(
            record, case, None, f"no {ENDPOINT_FILE}: its endpoint cannot be located", mapped=False
        )
    try:
        document = _read_json(mapping)
        endpoint = Path(document["endpoint"])
        case = Case.model_validate(document["case"])
    except (OSError, ValueError, KeyError, TypeError, ValidationError) as exc:
        return _Attempt(record, case, None, f"{ENDPOINT_FILE} is unreadable: {exc}")
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
    launch = AttemptPaths(record.directory).launch_message
    try:
        instructions = _read_json(launch)["instructions"]
        scan.text("instructions", str(instructions), source="handed")
    except FileNotFoundError:
        if attempt.endpoint is not None:
            findings.cannot_verify(record.attempt_id, f"no {LAUNCH_MESSAGE_FILE} recorded")
    except (OSError, ValueError, KeyError, TypeError) as exc:
        findings.cannot_verify(record.attempt_id, f"{LAUNCH_MESSAGE_FILE} is unreadable: {exc}")
    started = _actor_started(record.directory)
    if started is not None:
        scan.text("argv", _argv_text(started), source="handed")
        env = _env_text(started, attempt.endpoint)
        if env is not None:
            scan.text("env", env, source="handed")
    searched = _provider_web_searches(AttemptPaths(record.directory).provider_requests)
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
            _scan_endpoint(scan, attempt.endpoint)
        else:
            findings.cannot_verify(
                record.attempt_id,
                f"endpoint directory {attempt.endpoint} no longer exists: "
                "what its actor could read cannot be checked",
            )


def _provider_web_searches(ledger: Path) -> int:
    """Server-side tool uses (a provider's web search) the gateway metered for an
    attempt's actor (`provider-requests.jsonl`; none without a gateway)."""
    total = 0
    for record in read_log(ledger, kinds=(PROVIDER_REQUEST_EVENT,)).records:
        uses = record.get("server_tool_uses")
        if isinstance(uses, int) and not isinstance(uses, bool) and uses > 0:
            total += uses
    return total


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
    attempts = [_locate(r, plan_cases) for r in records]
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
    findings = _Findings()
    for attempt in attempts:
        _audit_attempt(attempt, identifiers, findings)
    leaks = sorted(findings.leaks.values(), key=lambda x: (x.attempt_id, x.where))
    information = sorted(findings.information.values(), key=lambda x: (x.attempt_id, x.where))
    return AuditVerdict(
        schema_=AUDIT_SCHEMA,
        run_id=run_id,
        audited_at=utc_timestamp(),
        attempts_scanned=len(attempts),
        files_scanned=findings.files,
        unverifiable=findings.unverifiable,
        leaks=leaks,
        information=information,
        clean=not leaks and not findings.unverifiable,
    )


def record_verdict(run: RunDirectory, verdict: AuditVerdict) -> None:
    """`RUN/audit.json` (the latest audit, written atomically) and an `audited` event."""
    document = verdict.document()
    errors = schema_errors(verdict.schema_, document)
    if errors:
        raise ValueError(f"audit verdict does not match {verdict.schema_}: {errors[0]}")
    publish_json(run.paths.audit, document)
    run.event(
        "audited",
        clean=verdict.clean,
        leaks=len(verdict.leaks),
        unverifiable=len(verdict.unverifiable),
        information=len(verdict.information or []),
    )


def read_verdict(run_dir: Path) -> AuditVerdict | None:
    """The run's latest recorded verdict, v1 (an earlier audit) or v2; None when the run
    was never audited. A file that is neither is an `AuditError`."""
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
    kind = document.get("schema") if isinstance(document, dict) else None
    if kind not in AUDIT_SCHEMAS:
        raise AuditError(f"{path} is not an audit verdict ({', '.join(AUDIT_SCHEMAS)})")
    errors = schema_errors(str(kind), document)
    if errors:
        raise AuditError(f"{path} does not match {kind}: {errors[0]}")
    try:
        return from_json(AuditVerdict, raw)
    except ValidationError as exc:
        raise AuditError(f"{path} does not match {kind}: {exc}") from exc


def audit_run(run_dir: Path) -> AuditVerdict:
    """Scan the run and record the verdict in it."""
    verdict = scan_run(run_dir)
    record_verdict(RunDirectory(run_dir), verdict)
    return verdict
