"""The audit's verdict: its model, as it is recorded in a run and read back.

A verdict lists every leak (one kind of private identifier, first found in one place an
actor could read), the information an actor wrote itself (a date, the benchmark's name:
never failing) and the attempts that could not be verified; it is clean exactly when it
lists no leak and nothing unverifiable. `mailroom.audit/v2` is what an audit writes: every
leak says where its text came from. A v1 verdict of an earlier audit still reads, and
serializes as its own version. `RUN/audit.json` holds the latest, checked against its
frozen schema both ways.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Any, Literal

from mailroom.mailbox.messages import from_json
from mailroom.mailbox.publish import publish_json
from mailroom.mailbox.schemas import schema_errors
from mailroom.orchestrator.audit.patterns import (
    KNOWABLE_UNTOLD,
    MAX_EXCERPT,
    IdentifierKind,
    InformationKind,
    Source,
)
from mailroom.orchestrator.records.layout import RunPaths
from mailroom.orchestrator.records.result import Timestamp
from mailroom.orchestrator.records.run_directory import RunDirectory
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


class AuditError(Exception):
    """The run cannot be audited; the message is meant for people."""


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
