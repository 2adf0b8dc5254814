"""Selection plans (`mailroom.plan/v3`): which cases a run attempts, each once, never
retried. The document and its model live here, with the selections of the LIBERO
catalogs; building and loading a plan goes through the family registry
(`families.plans`). Plans are written as version 3, the current one; a plan of an
earlier version (LIBERO and LIBERO-PRO plans were version 1, LIBERO-Plus and LIBERO-Para
plans version 2) is read as version 3 (`records/upgrade.py`, CHANGELOG.md).

A plan is content-addressed: `plan_sha256` covers everything else in the document as it
was written, so a run can record exactly what it was asked to do and a loader refuses
any edited plan. A plan read from an earlier version keeps its recorded hash, which is
not its upgraded document's: it is never written again (`render_plan`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any, Literal, cast, get_args

from mailroom.hashing import hash_document
from mailroom.mailbox.publish import document_bytes, publish_bytes
from mailroom.orchestrator.catalog.cases import Case
from mailroom.orchestrator.catalog.entries import BenchmarkName, CatalogEntry, FrozenModel
from mailroom.orchestrator.records.upgrade import RecordRefusedError
from pydantic import Field, model_validator

# Every plan written: `benchmark` names any registered family.
PLAN_SCHEMA: Literal["mailroom.plan/v3"] = "mailroom.plan/v3"
PlanKind = Literal["fast", "development", "task_coverage", "all", "canonical"]
PLAN_KINDS: tuple[str, ...] = get_args(PlanKind)

FIXED_SEED = 20260907
FIXED_INIT_STATE = 0
TASK_ORDER_INDEX = 0
CANONICAL_SEED = 7
CANONICAL_INIT_STATES = 50
MAX_PLAN_BYTES = 16 * 1024 * 1024

Sha256 = Annotated[str, Field(pattern=r"^[0-9a-f]{64}$")]
NonNegative = Annotated[int, Field(ge=0)]


class PlanError(Exception):
    """Any refusal to build, write or load a plan; the message is meant for people."""


class PlanOptionError(PlanError, ValueError):
    """The options do not describe a plan (missing, inapplicable or malformed)."""


class PlanInvalidError(PlanError, ValueError):
    """A plan document is malformed, fails its schema, or names cases the catalog lacks."""


class PlanRefusedError(PlanInvalidError, RecordRefusedError):
    """A document of no plan version this code knows, or one its version's frozen schema
    or, once upgraded, the current model refuses."""


class PlanHashMismatchError(PlanInvalidError):
    """The document was changed after its hash was computed."""


class PlanCatalogMismatchError(PlanError):
    """The plan was built against a different catalog than the one installed."""


class PlanExistsError(PlanError, FileExistsError):
    """A different plan already exists at the target path."""


class PlanCase(FrozenModel):
    """A case as the frozen plan document stores it (`Case` is the same selection as the
    coordinator's work unit); kept apart so the plan file's shape stays frozen."""

    benchmark: BenchmarkName
    suite: Annotated[str, Field(pattern=r"^[a-z0-9_]{1,100}$")]
    task_index: NonNegative
    init_state_index: NonNegative
    seed: Annotated[int, Field(ge=0, le=2**32 - 1)]
    task_order_index: NonNegative

    def to_case(self) -> Case:
        return Case.model_validate(self.model_dump())


class Plan(FrozenModel):
    schema_: Literal["mailroom.plan/v3"] = Field(default=PLAN_SCHEMA, alias="schema")
    kind: PlanKind
    label: Annotated[str, Field(min_length=1, max_length=200)]
    description: Annotated[str, Field(min_length=1, max_length=2000)]
    canonical_protocol: bool
    # A registered family's name: checked against the registry when a plan is loaded
    # (`families.plans`).
    benchmark: BenchmarkName
    catalog_sha256: Sha256
    attempts_per_case: Literal[1] = 1
    cases: Annotated[list[PlanCase], Field(min_length=1)]
    # The hash of the document as written (of an earlier version's, for a plan read
    # from one).
    plan_sha256: Sha256

    @model_validator(mode="after")
    def _consistent(self) -> Plan:
        if self.canonical_protocol != (self.kind == "canonical"):
            raise ValueError("canonical_protocol is true exactly for kind canonical")
        if any(c.benchmark != self.benchmark for c in self.cases):
            raise ValueError(f"every case must belong to benchmark {self.benchmark}")
        if len(set(self.cases)) != len(self.cases):
            raise ValueError("a plan never repeats a case")
        return self

    def document(self) -> dict[str, Any]:
        return self.model_dump(mode="json", by_alias=True)

    def to_cases(self) -> list[Case]:
        return [c.to_case() for c in self.cases]


def content_sha256(document: dict[str, Any]) -> str:
    """sha256 of everything but `plan_sha256`, as the schema's description defines it."""
    body = {k: v for k, v in document.items() if k != "plan_sha256"}
    return hash_document(body)


def format_ids(task_ids: Sequence[int]) -> str:
    return ",".join(str(i) for i in task_ids)


def unique_ids(task_ids: Sequence[int]) -> Sequence[int]:
    if not task_ids:
        raise PlanOptionError("task ids must name at least one task")
    duplicates = sorted({i for i in task_ids if list(task_ids).count(i) > 1})
    if duplicates:
        raise PlanOptionError(
            f"task ids repeat {format_ids(duplicates)}: a plan attempts each case once"
        )
    return task_ids


def cases_once(entries: Sequence[CatalogEntry], seed: int = FIXED_SEED) -> list[PlanCase]:
    return [
        PlanCase(
            benchmark=e.benchmark,
            suite=e.suite,
            task_index=e.task_index,
            init_state_index=FIXED_INIT_STATE,
            seed=seed,
            task_order_index=TASK_ORDER_INDEX,
        )
        for e in entries
    ]


def cases_canonical(entries: Sequence[CatalogEntry]) -> list[PlanCase]:
    """(task 0, state 0), (task 1, state 0), ..., (task 0, state 1), ..."""
    short = [e for e in entries if e.n_init_states < CANONICAL_INIT_STATES]
    if short:
        e = short[0]
        raise PlanOptionError(
            f"{e.suite} task {e.task_index} has {e.n_init_states} released initial states; "
            f"the canonical protocol needs {CANONICAL_INIT_STATES}"
        )
    return [
        PlanCase(
            benchmark=e.benchmark,
            suite=e.suite,
            task_index=e.task_index,
            init_state_index=state,
            seed=CANONICAL_SEED,
            task_order_index=TASK_ORDER_INDEX,
        )
        for state in range(CANONICAL_INIT_STATES)
        for e in entries
    ]


ONCE_NOTE = (
    "each once with released initial state 0, task order 0 and seed 20260907; every "
    "failure and error is kept and nothing is retried. An iteration plan: its results are "
    "not a reproduction of reported LIBERO numbers."
)


def refuse_options(kind: str, **given: object) -> None:
    for name, value in given.items():
        if value is not None:
            raise PlanOptionError(f"plan kind {kind!r} takes no {name.replace('_', ' ')}")


def plan_kind(kind: str) -> PlanKind:
    if kind in PLAN_KINDS:
        return cast(PlanKind, kind)
    raise PlanOptionError(f"unknown plan kind {kind!r}; choose one of {', '.join(PLAN_KINDS)}")


@dataclass(frozen=True)
class Selection:
    """What a plan kind picks: its cases, and how the plan describes them."""

    label: str
    description: str
    cases: list[PlanCase]


def render_plan(plan: Plan) -> bytes:
    """The plan file's bytes, in the model's key order (its hash is of the content). A
    plan whose hash is not its document's is refused: one read from an earlier version
    keeps the hash it was written with, and the bytes to keep are that file's."""
    document = plan.document()
    if content_sha256(document) != plan.plan_sha256:
        raise PlanError(
            f"plan_sha256 {plan.plan_sha256} is not this plan's content hash (a plan read "
            "from an earlier version keeps its own): keep the file it was read from"
        )
    return document_bytes(document, sort_keys=False)


def write_plan(plan: Plan, path: Path, *, overwrite: bool = False) -> Path:
    """Publish the plan atomically; an identical existing plan is left as it is."""
    data = render_plan(plan)
    if path.exists() and not overwrite:
        if path.is_file() and path.read_bytes() == data:
            return path
        raise PlanExistsError(f"{path} already exists and holds something else")
    path.parent.mkdir(parents=True, exist_ok=True)
    publish_bytes(path, data, durable=True)
    return path
