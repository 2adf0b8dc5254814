"""The blinding audit's verdict (`mailroom.audit/v3`): `RUN/audit.json`, the latest audit.

This is the current version, the only one written; a verdict of an earlier version is
read through `records/upgrade.py` (a v1 verdict's leaks say no source and it lists no
information: null). The version history is CHANGELOG.md; the JSON Schema of this
version is generated from these models (`records/generate_schemas.py`). How a run is
audited is `orchestrator/audit/`.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from mailroom.mailbox.messages import WireComplete
from mailroom.orchestrator.records.result import Timestamp
from pydantic import ConfigDict, Field, model_validator

AUDIT_SCHEMA: Literal["mailroom.audit/v3"] = "mailroom.audit/v3"

IdentifierKind = Literal[
    "run_id",
    "run_directory",
    "case_id",
    "benchmark",
    "suite",
    "task_name",
    "bddl_file",
    "seed",
    "init_state_index",
    "private_key",
    "date",
]
# Where a text an actor could read comes from: the evaluator, or the actor itself.
Source = Literal["handed", "actor_written"]
# What an actor can know untold, so may write itself: a date, and the benchmark's name.
InformationKind = Literal["benchmark", "date"]
UNTOLD: dict[IdentifierKind, InformationKind] = {"benchmark": "benchmark", "date": "date"}
KNOWABLE_UNTOLD: frozenset[IdentifierKind] = frozenset(UNTOLD)
MAX_EXCERPT = 200
MAX_WHERE = 1000
MAX_REASON = 500

AttemptId = Annotated[str, Field(min_length=1, max_length=300)]
Where = Annotated[
    str,
    Field(
        min_length=1,
        max_length=MAX_WHERE,
        description="A path relative to the endpoint directory, or instructions, argv, env "
        "or endpoint (the endpoint directory's own path); with source, it names one place.",
    ),
]
Excerpt = Annotated[str, Field(max_length=MAX_EXCERPT)]

# The rules of `mailroom.audit/v2` a JSON Schema can state, kept in the generated one.
_NOTHING_FOUND_WHEN_CLEAN: dict[str, Any] = {
    "if": {"properties": {"clean": {"const": True}}},
    "then": {"properties": {"leaks": {"maxItems": 0}, "unverifiable": {"maxItems": 0}}},
    "else": {
        "anyOf": [
            {"properties": {"leaks": {"minItems": 1}}},
            {"properties": {"unverifiable": {"minItems": 1}}},
        ]
    },
}
_WRITTEN_UNTOLD_IS_NO_LEAK: dict[str, Any] = {
    "if": {"properties": {"source": {"const": "actor_written"}}},
    "then": {"properties": {"identifier_kind": {"not": {"enum": sorted(KNOWABLE_UNTOLD)}}}},
}


class _Strict(WireComplete):
    model_config = ConfigDict(extra="forbid", frozen=True)


class Leak(_Strict):
    """The first occurrence of one kind of private identifier in one place an actor
    could read. A date or the benchmark's name the actor wrote itself is never a leak."""

    model_config = ConfigDict(json_schema_extra=_WRITTEN_UNTOLD_IS_NO_LEAK)

    attempt_id: AttemptId
    where: Where
    identifier_kind: IdentifierKind
    excerpt: Excerpt
    source: Annotated[
        Source | None,
        Field(
            description="handed: the evaluator gave the actor this text; actor_written: the "
            "actor wrote it itself; null: not recorded (an audit before v2)."
        ),
    ]


class Information(_Strict):
    """The first occurrence of a date, or of the benchmark's public name, in one place
    the actor wrote itself: what an actor can know untold (its model provider tells it
    today's date; it may recognise the benchmark's public scenes). Reported, never
    failing."""

    attempt_id: AttemptId
    where: Where
    kind: InformationKind
    excerpt: Excerpt
    source: Literal["actor_written"]


class Unverifiable(_Strict):
    """An attempt whose visible material could not be fully examined (its endpoint
    directory is gone, a file could not be read, ...)."""

    attempt_id: AttemptId
    reason: Annotated[str, Field(min_length=1, max_length=MAX_REASON)]


class AuditVerdict(_Strict):
    """A blinding audit of one run: everything an actor of the run could read, searched
    for the run's private identifiers, each find judged by where its text came from. What
    the evaluator handed the actor (its argv, environment and rendered instructions, its
    endpoint's own path, every name and file under outbox/) must name nothing private.
    What the actor wrote itself (names and files under inbox/ and scratch/, anything else
    under its endpoint) is judged by what it could know untold: a date or the benchmark's
    name there is information, which never fails the audit; any other private identifier
    there is a leak. Private: it lives in the run directory. clean is true exactly when
    nothing leaked and nothing was unverifiable; information does not count. A null
    `information`, with every leak's `source` null, was not recorded (a verdict upgraded
    from v1, whose audit listed every find as a leak); every verdict written now records
    both."""

    model_config = ConfigDict(populate_by_name=True, json_schema_extra=_NOTHING_FOUND_WHEN_CLEAN)

    schema_: Literal["mailroom.audit/v3"] = Field(default=AUDIT_SCHEMA, alias="schema")
    run_id: Annotated[str, Field(min_length=1)]
    audited_at: Timestamp
    attempts_scanned: Annotated[int, Field(ge=0)]
    files_scanned: Annotated[int, Field(ge=0)]
    unverifiable: list[Unverifiable]
    leaks: list[Leak]
    information: list[Information] | None
    clean: bool

    @model_validator(mode="after")
    def _clean_means_nothing_found(self) -> AuditVerdict:
        if self.clean != (not self.leaks and not self.unverifiable):
            raise ValueError("clean is true exactly when nothing leaked or was unverifiable")
        return self

    @model_validator(mode="after")
    def _judged_by_source(self) -> AuditVerdict:
        recorded = self.information is not None
        for leak in self.leaks:
            if recorded and leak.source is None:
                raise ValueError("every leak of a verdict listing its information has a source")
            if not recorded and leak.source is not None:
                raise ValueError("a verdict without its information records no leak's source")
            if leak.source == "actor_written" and leak.identifier_kind in KNOWABLE_UNTOLD:
                raise ValueError(
                    f"a {leak.identifier_kind} an actor wrote itself is information, not a leak"
                )
        return self

    def document(self) -> dict[str, Any]:
        return self.model_dump(mode="json", by_alias=True)
