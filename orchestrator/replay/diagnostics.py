"""Post-episode diagnostics: which of the task's goal predicates held, and from when.

Computed only during a replay, from the simulator's own predicate checks (`GoalProbe`)
after settling and after every executed control; written apart from the result
(`diagnostics.json` beside it, frozen as `mailroom.diagnostics/v1`). Never a score,
never in a success rate, never shown to an actor.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Literal

from mailroom.mailbox.publish import publish_json
from mailroom.mailbox.schemas import schema_errors
from mailroom.orchestrator.records.layout import AttemptPaths
from mailroom.orchestrator.records.result import Timestamp
from mailroom.orchestrator.records.run_directory import RunDirectory
from mailroom.timestamps import utc_timestamp
from pydantic import BaseModel, ConfigDict, Field, ValidationError

DIAGNOSTICS_SCHEMA: Literal["mailroom.diagnostics/v1"] = "mailroom.diagnostics/v1"
LABEL: Literal["post-episode diagnostics: never a score"] = (
    "post-episode diagnostics: never a score"
)


class PredicateDiagnostic(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    predicate: str = Field(min_length=1, max_length=500)
    first_held_control: int | None = Field(default=None, ge=0)
    held_at_end: bool


class AttemptDiagnostics(BaseModel):
    model_config = ConfigDict(extra="forbid", populate_by_name=True)

    schema_: Literal["mailroom.diagnostics/v1"] = Field(default=DIAGNOSTICS_SCHEMA, alias="schema")
    attempt_id: str = Field(min_length=1, max_length=300)
    label: Literal["post-episode diagnostics: never a score"] = LABEL
    replay_verdict: Literal["reproduced", "diverged"]
    controls_evaluated: int = Field(ge=0)
    predicates: list[PredicateDiagnostic]
    computed_at: Timestamp

    def document(self) -> dict[str, object]:
        return self.model_dump(mode="json", by_alias=True)


class GoalTracker:
    """Hears the predicates after each control (0: after settling)."""

    def __init__(self) -> None:
        self.first_held: dict[str, int | None] = {}
        self.last: dict[str, bool] = {}
        self.controls = 0

    def observe(self, control: int, predicates: list[tuple[str, bool]]) -> None:
        self.controls = control
        for name, held in predicates:
            self.first_held.setdefault(name, None)
            if held and self.first_held[name] is None:
                self.first_held[name] = control
            self.last[name] = held

    def diagnostics(
        self, attempt_id: str, verdict: Literal["reproduced", "diverged"]
    ) -> AttemptDiagnostics:
        return AttemptDiagnostics(
            attempt_id=attempt_id,
            replay_verdict=verdict,
            controls_evaluated=self.controls,
            predicates=[
                PredicateDiagnostic(
                    predicate=name, first_held_control=first, held_at_end=self.last[name]
                )
                for name, first in self.first_held.items()
            ],
            computed_at=utc_timestamp(),
        )


def write_diagnostics(directory: Path, diagnostics: AttemptDiagnostics) -> Path:
    document = diagnostics.document()
    errors = schema_errors(DIAGNOSTICS_SCHEMA, document)
    if errors:
        raise ValueError(f"diagnostics do not match {DIAGNOSTICS_SCHEMA}: {errors[0]}")
    path = AttemptPaths(directory).diagnostics
    publish_json(path, document)
    return path


def read_diagnostics(directory: Path) -> AttemptDiagnostics | None:
    """An attempt's diagnostics, or None (none computed, or not what they should be)."""
    path = AttemptPaths(directory).diagnostics
    try:
        document = json.loads(path.read_bytes())
    except (OSError, ValueError):
        return None
    if schema_errors(DIAGNOSTICS_SCHEMA, document):
        return None
    try:
        return AttemptDiagnostics.model_validate(document)
    except ValidationError:
        return None


def run_diagnostics(run: RunDirectory) -> list[AttemptDiagnostics]:
    return [d for r in run.attempts() if (d := read_diagnostics(r.directory)) is not None]
