"""Reading a private record of any version as its current version, step by step.

Each record (a result, a run manifest, a plan, an audit verdict) has one current
version, the only one written, and a history of earlier ones. A document of an earlier
version is first checked against its own frozen schema (`schemas/`, never edited), then
upgraded one version at a time: each step fills what its version added with what the
field meant before it, never an invented value (null where it was not recorded). A
current document is checked against its generated schema (a plan's is hand-written:
`PLAN_HISTORY`). Either way the model of the current version has the last word.
Anything refused is a `RecordRefusedError` naming the version and the problem; the
document itself is never changed.

Results, manifests and verdicts are read here (`upgrade_result`, `upgrade_manifest`,
`upgrade_verdict`); a plan, whose model sits above this room and whose hash is checked
on the document as written, by `families/plans.py` through `upgraded_document`.

CHANGELOG.md tells the same history for people.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

from mailroom.mailbox.schemas import schema_errors
from mailroom.orchestrator.records.audit_verdict import AuditVerdict
from mailroom.orchestrator.records.manifest import INSTRUCTIONS_BEFORE_VERSIONS, RunManifest
from mailroom.orchestrator.records.result import (
    UNMETERED_BEFORE_GATEWAY,
    EpisodeResult,
)
from pydantic import BaseModel, ValidationError

Document = dict[str, Any]
# One step: a document of one version made the next one's, in place.
Step = Callable[[Document], None]
ModelT = TypeVar("ModelT", bound=BaseModel)


class RecordRefusedError(ValueError):
    """A record that cannot be read: its version (None when it names none this code
    knows) and the problem, meant for people."""

    def __init__(self, kind: str, version: str | None, problem: str) -> None:
        self.kind = kind
        self.version = version
        self.problem = problem
        article = "an" if kind[0] in "aeiou" else "a"
        where = f"does not match {version}" if version is not None else f"is not {article} {kind}"
        super().__init__(f"{where}: {problem}")


@dataclass(frozen=True)
class History:
    """A record's versions, oldest first (the last is current), and the steps between
    them: `steps[i]` makes a `versions[i]` document a `versions[i + 1]` one."""

    kind: str
    versions: tuple[str, ...]
    steps: tuple[Step, ...]
    # False: the current version's schema is a hand-written, frozen file, not its model's.
    generated: bool = True

    def __post_init__(self) -> None:
        if len(self.steps) != len(self.versions) - 1:
            raise ValueError(f"the {self.kind} history needs one step between two versions")

    @property
    def current(self) -> str:
        return self.versions[-1]


def versions(prefix: str, newest: int) -> tuple[str, ...]:
    """`mailroom.episode_result/v1` ... `/v<newest>`."""
    return tuple(f"{prefix}/v{n}" for n in range(1, newest + 1))


def version_of(history: History, document: object) -> str:
    """The version a document names, one of `history`'s, or a `RecordRefusedError`."""
    named = document.get("schema") if isinstance(document, dict) else None
    if not isinstance(document, dict):
        raise RecordRefusedError(history.kind, None, "not a JSON object")
    if named not in history.versions:
        known = f"{history.versions[0]} to {history.current}"
        raise RecordRefusedError(history.kind, None, f"its schema {named!r} is none of {known}")
    return str(named)


def upgraded_document(history: History, document: object) -> Document:
    """A copy of `document` as its current version, after it was checked against the
    schema of the version it names."""
    version = version_of(history, document)
    errors = schema_errors(version, document)
    if errors:
        raise RecordRefusedError(history.kind, version, errors[0])
    upgraded: Document = copy.deepcopy(document)  # type: ignore[arg-type]
    start = history.versions.index(version)
    for step, following in zip(history.steps[start:], history.versions[start + 1 :], strict=True):
        step(upgraded)
        upgraded["schema"] = following
    return upgraded


def upgraded_model(history: History, model: type[ModelT], document: object) -> ModelT:
    """`document` as the current version's model (`upgraded_document`, then the model's
    own checks, which a JSON Schema cannot say)."""
    upgraded = upgraded_document(history, document)
    try:
        return model.model_validate(upgraded)
    except ValidationError as exc:
        raise RecordRefusedError(history.kind, version_of(history, document), _first(exc)) from exc


def _first(exc: ValidationError) -> str:
    error = exc.errors()[0]
    where = "/".join(str(p) for p in error["loc"])
    return f"{where}: {error['msg']}" if where else str(error["msg"])


def _adds(*fields: str) -> Step:
    """A version that adds `fields`: before it they were not recorded (null)."""

    def step(document: Document) -> None:
        for name in fields:
            document[name] = None

    return step


def _same_shape(document: Document) -> None:
    """A version that only widens what a field may hold: an older document is already
    one of it."""


# --- episode results ---------------------------------------------------------------


def _result_usage_before_gateway(document: Document) -> None:
    """v7 lets `usage` be what the provider gateway metered; before it, nothing could:
    the null usage says so."""
    document["usage"] = {**document["usage"], "source": UNMETERED_BEFORE_GATEWAY}


RESULT_HISTORY = History(
    kind="episode result",
    versions=versions("mailroom.episode_result", 8),
    steps=(
        _adds("confinement"),  # v2
        _adds("queue_delay", "processing"),  # v3
        _adds("instructions_version"),  # v4
        _adds("simulator"),  # v5
        _adds("enforcement"),  # v6
        _result_usage_before_gateway,  # v7
        _same_shape,  # v8: a provider may be "gemini"
    ),
)


def upgrade_result(document: object) -> EpisodeResult:
    """A result document of any version as the current `EpisodeResult`."""
    return upgraded_model(RESULT_HISTORY, EpisodeResult, document)


# --- run manifests -----------------------------------------------------------------


def _manifest_instructions(document: Document) -> None:
    """v3 names the instructions version every actor was handed: before it, every actor
    was handed v1, whatever its profile declared; and records the profile's programs,
    which before it were not recorded (null)."""
    document["blinding"] = {
        **document["blinding"],
        "instructions_version": INSTRUCTIONS_BEFORE_VERSIONS,
    }
    document["profile"] = {**document["profile"], "programs": None}


def _manifest_benchmark(document: Document) -> None:
    """v4 names the run's benchmark family; before it the run's plan named it (null)."""
    document["protocol"] = {**document["protocol"], "benchmark": None}


def _manifest_gateway(document: Document) -> None:
    """v6 records the provider gateway; before it there was none to reach."""
    document["provider_gateway"] = None
    document["volatile"] = {**document["volatile"], "provider_upstream": None}


def _manifest_always_written(document: Document) -> None:
    """v7 writes every member: no programs copied is {} (before, their absence said it),
    and a run from before the outbox durability setting published durably."""
    profile, settings = document["profile"], document["settings"]
    document["profile"] = {**profile, "programs": profile.get("programs", {})}
    durability = settings.get("outbox_durability", "durable")
    document["settings"] = {**settings, "outbox_durability": durability}


def _manifest_family_shape(document: Document) -> None:
    """v8 lets a run's actors speak mailbox protocol v2 and records the family guide they
    were handed (before it every run spoke v1 and no guide was handed: null), and the
    camera transform its family declares (before it a constant written for every
    family, so not a record of what the run's adapter did: null)."""
    document["protocol"] = {
        **document["protocol"],
        "actor_guide_sha256": None,
        "camera_transform": None,
    }


MANIFEST_HISTORY = History(
    kind="run manifest",
    versions=versions("mailroom.run_manifest", 8),
    steps=(
        _adds("confinement"),  # v2
        _manifest_instructions,  # v3
        _manifest_benchmark,  # v4
        _adds("enforcement"),  # v5
        _manifest_gateway,  # v6
        _manifest_always_written,  # v7: a provider may be "gemini"
        _manifest_family_shape,  # v8: mailbox protocol v2, the family's camera transform
    ),
)


def upgrade_manifest(document: object) -> RunManifest:
    """A run manifest of any version as the current `RunManifest`."""
    return upgraded_model(MANIFEST_HISTORY, RunManifest, document)


# --- plans ---------------------------------------------------------------------------


def _plan_relabelled(document: Document) -> None:
    """A plan's members never changed: a version only changed which benchmarks a plan
    may name (v2: LIBERO-Plus and LIBERO-Para, each with a catalog of its own, apart from
    v1's LIBERO and LIBERO-PRO; v3: any registered family). Only its `schema` moves on:
    `plan_sha256` stays the hash of the document as written, which its loader checks."""


PLAN_HISTORY = History(
    kind="plan",
    versions=versions("mailroom.plan", 3),
    steps=(
        _plan_relabelled,  # v2
        _plan_relabelled,  # v3
    ),
    # v3 predates generated schemas: one generated from `Plan` would not be the frozen
    # file (its descriptions, the canonical_protocol rule), so v3 stays as written.
    generated=False,
)


# --- audit verdicts ----------------------------------------------------------------


def _audit_sources(document: Document) -> None:
    """v2 judges each find by where its text came from: every leak says its `source`, and
    what an actor wrote itself that it could know untold (a date, the benchmark's name)
    is `information`, never a leak. A v1 audit judged everything as if it was handed:
    its leaks' sources were not recorded (null), and it told no information apart (null:
    such a find is among its leaks)."""
    document["leaks"] = [{**leak, "source": None} for leak in document["leaks"]]
    document["information"] = None


AUDIT_HISTORY = History(
    kind="audit verdict",
    versions=versions("mailroom.audit", 3),
    steps=(
        _audit_sources,  # v2
        _same_shape,  # v3: generated schema; what v1 did not record may be null
    ),
)


def upgrade_verdict(document: object) -> AuditVerdict:
    """An audit verdict of any version as the current `AuditVerdict`."""
    return upgraded_model(AUDIT_HISTORY, AuditVerdict, document)


HISTORIES: Sequence[History] = (RESULT_HISTORY, MANIFEST_HISTORY, PLAN_HISTORY, AUDIT_HISTORY)
