"""Selection plans (`mailroom.plan/v1`, `/v2`, `/v3`): which cases a run attempts, each
once, never retried. The document and its model live here, with the selections of the
LIBERO catalogs; building and loading a plan goes through the family registry
(`families.plans`). New plans are version 3; LIBERO and LIBERO-PRO plans were version 1
before it and LIBERO-Plus and LIBERO-Para plans version 2, and such plans still load.

A plan is content-addressed: `plan_sha256` covers everything else in the document, so a
run can record exactly what it was asked to do and a loader refuses any edited plan.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any, Literal, cast, get_args

from mailroom.hashing import hash_document
from mailroom.mailbox.publish import document_bytes, publish_bytes
from mailroom.orchestrator.catalog.cases import Case
from mailroom.orchestrator.catalog.frozen import (
    Catalog,
    CatalogEntry,
    FrozenModel,
    load_catalog,
)
from mailroom.orchestrator.catalog.para import PARA_SUITE, ParaEntry, load_para_catalog
from mailroom.orchestrator.catalog.plus_frozen import (
    PLUS_CATEGORIES,
    load_plus_catalog,
)
from pydantic import Field, model_validator

PLAN_SCHEMA: Literal["mailroom.plan/v1"] = "mailroom.plan/v1"
PLAN_SCHEMA_V2: Literal["mailroom.plan/v2"] = "mailroom.plan/v2"
# Every plan written from now on: `benchmark` names any registered family.
PLAN_SCHEMA_V3: Literal["mailroom.plan/v3"] = "mailroom.plan/v3"
PLAN_SCHEMAS = (PLAN_SCHEMA, PLAN_SCHEMA_V2, PLAN_SCHEMA_V3)
# The benchmarks each earlier version's frozen schema enumerates (v3 names any family).
LEGACY_PLAN_BENCHMARKS: dict[str, tuple[str, ...]] = {
    PLAN_SCHEMA: ("libero", "libero_pro"),
    PLAN_SCHEMA_V2: ("libero_plus", "libero_para"),
}
PlanKind = Literal["fast", "development", "task_coverage", "all", "canonical"]
PLAN_KINDS: tuple[str, ...] = get_args(PlanKind)

FIXED_SEED = 20260907
FIXED_INIT_STATE = 0
TASK_ORDER_INDEX = 0
FAST_SUITE = "libero_10"
FAST_TASK_IDS = (0, 1)
DEVELOPMENT_SUITE = "libero_10"
DEVELOPMENT_TASK_IDS = (0, 1, 2, 3, 4)
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


class PlanHashMismatchError(PlanInvalidError):
    """The document was changed after its hash was computed."""


class PlanCatalogMismatchError(PlanError):
    """The plan was built against a different catalog than the one installed."""


class PlanExistsError(PlanError, FileExistsError):
    """A different plan already exists at the target path."""


BenchmarkName = Annotated[str, Field(pattern=r"^[a-z][a-z0-9_]{0,63}$")]


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
    schema_: Literal["mailroom.plan/v1", "mailroom.plan/v2", "mailroom.plan/v3"] = Field(
        default=PLAN_SCHEMA_V3, alias="schema"
    )
    kind: PlanKind
    label: Annotated[str, Field(min_length=1, max_length=200)]
    description: Annotated[str, Field(min_length=1, max_length=2000)]
    canonical_protocol: bool
    # A registered family's name: checked against the registry when a plan is loaded
    # (`families.plans`); v1 and v2 documents name only the four built-in families.
    benchmark: BenchmarkName
    catalog_sha256: Sha256
    attempts_per_case: Literal[1] = 1
    cases: Annotated[list[PlanCase], Field(min_length=1)]
    plan_sha256: Sha256

    @model_validator(mode="after")
    def _consistent(self) -> Plan:
        if self.canonical_protocol != (self.kind == "canonical"):
            raise ValueError("canonical_protocol is true exactly for kind canonical")
        if any(c.benchmark != self.benchmark for c in self.cases):
            raise ValueError(f"every case must belong to benchmark {self.benchmark}")
        if len(set(self.cases)) != len(self.cases):
            raise ValueError("a plan never repeats a case")
        allowed = LEGACY_PLAN_BENCHMARKS.get(self.schema_)
        if allowed is not None and self.benchmark not in allowed:
            version = next(
                (v for v, names in LEGACY_PLAN_BENCHMARKS.items() if self.benchmark in names),
                PLAN_SCHEMA_V3,
            )
            raise ValueError(f"a {self.benchmark} plan is a {version} document")
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


def _select(catalog: Catalog, suite: str, task_ids: Sequence[int]) -> list[CatalogEntry]:
    return [catalog.entry(suite, i) for i in unique_ids(task_ids)]


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


def _fast(catalog: Catalog, suite: str | None, task_ids: Sequence[int] | None) -> Selection:
    suite = suite or FAST_SUITE
    entries = _select(catalog, suite, FAST_TASK_IDS if task_ids is None else task_ids)
    ids = format_ids([e.task_index for e in entries])
    return Selection(
        label=f"fast: {suite} tasks {ids}, each once",
        description=f"Fast plan: preselected {suite} tasks {ids}, {ONCE_NOTE}",
        cases=cases_once(entries),
    )


def _development(catalog: Catalog, suite: str | None, task_ids: Sequence[int] | None) -> Selection:
    if suite is not None and suite != DEVELOPMENT_SUITE:
        raise PlanOptionError(
            f"plan kind 'development' covers {DEVELOPMENT_SUITE} only, not {suite!r}"
        )
    wanted = DEVELOPMENT_TASK_IDS if task_ids is None else tuple(task_ids)
    outside = [i for i in wanted if i not in DEVELOPMENT_TASK_IDS]
    if outside:
        raise PlanOptionError(
            f"plan kind 'development' permits {DEVELOPMENT_SUITE} task ids 0-4, "
            f"not {format_ids(outside)}"
        )
    entries = _select(catalog, DEVELOPMENT_SUITE, wanted)
    ids = format_ids(wanted)
    return Selection(
        label=f"development: {DEVELOPMENT_SUITE} tasks {ids}, each once",
        description=f"Development plan: {DEVELOPMENT_SUITE} tasks {ids}, {ONCE_NOTE}",
        cases=cases_once(entries),
    )


def _task_coverage(
    catalog: Catalog, suite: str | None, task_ids: Sequence[int] | None
) -> Selection:
    if suite is None or task_ids is None:
        raise PlanOptionError("plan kind 'task_coverage' needs an explicit suite and task ids")
    entries = _select(catalog, suite, task_ids)
    ids = format_ids(task_ids)
    return Selection(
        label=f"task coverage: {suite} tasks {ids}, each once",
        description=f"Task-coverage plan: {suite} tasks {ids} in this order, {ONCE_NOTE}",
        cases=cases_once(entries),
    )


def _all(catalog: Catalog, suite: str | None, task_ids: Sequence[int] | None) -> Selection:
    refuse_options("all", suite=suite, task_ids=task_ids)
    entries = [e for s in catalog.suites("libero") for e in catalog.suite_entries(s)]
    n = len(entries)
    return Selection(
        label=f"all: the {n} standard LIBERO suite-task entries, each once",
        description=(
            f"All-entries plan: the {n} standard LIBERO suite-task entries in catalog order, "
            f"{ONCE_NOTE} Not the canonical protocol and not a {n} x "
            f"{CANONICAL_INIT_STATES} full schedule."
        ),
        cases=cases_once(entries),
    )


def _canonical_protocol(
    catalog: Catalog, suite: str | None, task_ids: Sequence[int] | None
) -> Selection:
    if suite is None:
        raise PlanOptionError("plan kind 'canonical' needs a suite")
    refuse_options("canonical", task_ids=task_ids)
    entries = catalog.suite_entries(suite)
    description = (
        f"The field's canonical LIBERO protocol applied to {suite}: every task from each of "
        f"its {CANONICAL_INIT_STATES} published fixed initial states, seed {CANONICAL_SEED}, "
        "task order 0, success rate aggregated per suite. Cases interleave tasks: (task 0, "
        "state 0), (task 1, state 0), ..., (task 0, state 1), ... Every failure and error is "
        "kept and nothing is retried."
    )
    if entries[0].benchmark == "libero_pro":
        description += (
            " LIBERO-PRO suite: published PRO BDDL and language, paired released initial states."
        )
    return Selection(
        label=(
            f"CANONICAL protocol: {suite}, {len(entries)} tasks x {CANONICAL_INIT_STATES} "
            f"fixed initial states, seed {CANONICAL_SEED}"
        ),
        description=description,
        cases=cases_canonical(entries),
    )


def select_plus(
    kind: str, suite: str, task_ids: Sequence[int] | None, category: str | None
) -> Selection:
    """LIBERO-Plus plans: by suite, category and task, over the offline tasks only."""
    catalog = load_plus_catalog()
    catalog.suite_entries(suite, category)  # an unknown suite or category, refused first
    if kind in ("development", "all"):
        raise PlanOptionError(f"plan kind {kind!r} covers standard LIBERO, not {suite}")
    picked = f"{category} tasks" if category else "tasks"
    if kind == "fast":
        refuse_options("fast", category=category)
        if task_ids is None:
            entries = [
                found[0]
                for name in PLUS_CATEGORIES
                if (found := catalog.suite_entries(suite, name))
            ]
        else:
            entries = [catalog.entry(suite, i) for i in unique_ids(task_ids)]
        shown = ", ".join(f"{e.category} {e.task_index}" for e in entries)
        picked = (
            "one offline task per category"
            if task_ids is None
            else f"tasks {format_ids(task_ids)}"
        )
        return Selection(
            label=f"fast: {suite}, {picked}, each once",
            description=f"Fast plan: {suite} tasks {shown}, {ONCE_NOTE}"[:2000],
            cases=cases_once(entries),
        )
    if kind == "task_coverage":
        if task_ids is None and category is None:
            raise PlanOptionError(
                "plan kind 'task_coverage' on LIBERO-Plus needs task ids or a category"
            )
        if task_ids is None:
            entries = catalog.suite_entries(suite, category)
        else:
            entries = [catalog.entry(suite, i) for i in unique_ids(task_ids)]
            stray = [e.task_index for e in entries if category and e.category != category]
            if stray:
                raise PlanOptionError(f"{suite} tasks {format_ids(stray)} are not {category} tasks")
        if not entries:
            raise PlanOptionError(f"{suite} has no offline {category} tasks")
        return Selection(
            label=f"task coverage: {suite} {picked} ({len(entries)}), each once",
            description=(
                f"Task-coverage plan: {len(entries)} offline {suite} {picked} in the package's "
                f"order, {ONCE_NOTE}"
            ),
            cases=cases_once(entries),
        )
    refuse_options("canonical", task_ids=task_ids)
    entries = catalog.suite_entries(suite, category)
    if not entries:
        raise PlanOptionError(f"{suite} has no offline {category} tasks")
    return Selection(
        label=f"CANONICAL protocol: {suite} {picked}, {len(entries)} x 1 trial, seed "
        f"{CANONICAL_SEED}",
        description=(
            f"LIBERO-Plus's evaluation protocol applied to {suite}: LIBERO's, with one trial "
            "per task instead of 50 (the package's stated change): every offline "
            f"{category + ' ' if category else ''}task once from released initial state 0, "
            f"seed {CANONICAL_SEED}, task order 0, success rate "
            "aggregated per suite and category. Tasks that need the package's separate "
            "assets are not in the catalog and not in the plan. Every failure and error is "
            "kept and nothing is retried."
        ),
        cases=cases_once(entries, seed=CANONICAL_SEED),
    )


def select_para(kind: str, task_ids: Sequence[int] | None, cell: str | None) -> Selection:
    """LIBERO-Para plans over the declared copy: by cell and by LIBERO-Goal task (its
    ids, 0-9), each paraphrase run on its Goal task's scene and released states."""
    catalog = load_para_catalog()
    goal_tasks = None if task_ids is None else list(unique_ids(task_ids))
    entries = catalog.select(cell, goal_tasks)
    where = " ".join(
        part
        for part in (
            f"cell {cell}" if cell is not None else "",
            f"Goal tasks {format_ids(goal_tasks)}" if goal_tasks is not None else "",
        )
        if part
    )
    picked = f"{PARA_SUITE} {where}".strip()
    if not entries:
        raise PlanOptionError(f"the LIBERO-Para copy has no runnable paraphrase for {picked}")
    revision = catalog.revision or "unrecorded"
    if kind in ("development", "all"):
        raise PlanOptionError(f"plan kind {kind!r} covers standard LIBERO, not {PARA_SUITE}")
    if kind == "fast":
        refuse_options("fast", cell=cell)
        firsts: dict[str, ParaEntry] = {}
        for e in entries:
            firsts.setdefault(e.cell or "", e)
        entries = list(firsts.values())
        return Selection(
            label=f"fast: {picked}, one paraphrase per cell, each once",
            description=(
                f"Fast plan: {len(entries)} LIBERO-Para paraphrases (copy revision "
                f"{revision}), the first of each cell, {ONCE_NOTE}"
            ),
            cases=cases_once(entries),
        )
    if kind == "task_coverage":
        if cell is None and goal_tasks is None:
            raise PlanOptionError(
                "plan kind 'task_coverage' on LIBERO-Para needs a cell or Goal task ids"
            )
        return Selection(
            label=f"task coverage: {picked}, {len(entries)} paraphrases, each once",
            description=(
                f"Task-coverage plan: {len(entries)} LIBERO-Para paraphrases of {picked} "
                f"(copy revision {revision}) in path order, {ONCE_NOTE}"
            ),
            cases=cases_once(entries),
        )
    states = min(e.n_init_states for e in entries)
    if states < CANONICAL_INIT_STATES:
        raise PlanOptionError(f"a Goal task has {states} released states, not 50")
    return Selection(
        label=(
            f"CANONICAL protocol: {picked}, {len(entries)} paraphrases x "
            f"{CANONICAL_INIT_STATES} Goal states, seed {CANONICAL_SEED}"
        ),
        description=(
            f"The canonical LIBERO protocol over LIBERO-Para (copy revision {revision}): "
            f"each selected paraphrase on its LIBERO-Goal task from each of the "
            f"{CANONICAL_INIT_STATES} released Goal states, seed {CANONICAL_SEED}, task "
            "order 0, success aggregated per cell. Cases interleave paraphrases as the "
            "canonical protocol interleaves tasks. Every failure and error is kept and "
            "nothing is retried."
        ),
        cases=cases_canonical(entries),
    )


_BUILDERS: dict[PlanKind, Callable[[Catalog, str | None, Sequence[int] | None], Selection]] = {
    "fast": _fast,
    "development": _development,
    "task_coverage": _task_coverage,
    "all": _all,
    "canonical": _canonical_protocol,
}


def select_libero(kind: str, suite: str | None, task_ids: Sequence[int] | None) -> Selection:
    """A plan kind's cases from the frozen LIBERO catalog (LIBERO and LIBERO-PRO)."""
    return _BUILDERS[plan_kind(kind)](load_catalog(), suite, task_ids)


def render_plan(plan: Plan) -> bytes:
    """The plan file's bytes, in the model's key order (its hash is of the content)."""
    return document_bytes(plan.document(), sort_keys=False)


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
