"""Building, reading and checking selection plans through the family registry.

A plan's cases come from the family that owns its suite (`BenchmarkFamily.select`); a
loaded plan is checked against the family it names: registered, the catalog it was
built against still installed, every case in that catalog. Plans are written as
`mailroom.plan/v3`; a plan of any version is read as that one: checked against its own
version's frozen schema, its hash against the document as written, then upgraded
(`records/upgrade.py`).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, cast

from mailroom.orchestrator.catalog.entries import CatalogError
from mailroom.orchestrator.catalog.plan_states import with_states
from mailroom.orchestrator.catalog.plans import (
    MAX_PLAN_BYTES,
    PLAN_SCHEMA,
    Plan,
    PlanCatalogMismatchError,
    PlanHashMismatchError,
    PlanInvalidError,
    PlanOptionError,
    PlanRefusedError,
    content_sha256,
    plan_kind,
)
from mailroom.orchestrator.families.base import BenchmarkFamily, UnknownBenchmarkError
from mailroom.orchestrator.families.registry import (
    DEFAULT_BENCHMARK,
    families,
    family,
    family_of_suite,
)
from mailroom.orchestrator.records.upgrade import (
    PLAN_HISTORY,
    RecordRefusedError,
    upgraded_document,
)
from pydantic import ValidationError


def _checked_options(chosen: BenchmarkFamily, options: Mapping[str, str | None]) -> dict[str, str]:
    """The options given, each one the chosen family takes; another family's is refused
    with the family that takes it."""
    taken = {o.name for o in chosen.plan_options}
    given = {k: v for k, v in options.items() if v is not None}
    for name in given:
        if name in taken:
            continue
        owners = [f for f in families().values() if name in {o.name for o in f.plan_options}]
        if owners:
            title = owners[0].title
            raise PlanOptionError(f"a {name} selects {title} tasks: give a {title} suite")
        raise PlanOptionError(f"no benchmark family takes a {name}")
    return given


def build_plan(
    kind: str,
    suite: str | None = None,
    task_ids: Sequence[int] | None = None,
    *,
    init_states: Sequence[int] | None = None,
    **options: str | None,
) -> Plan:
    """Build a plan from the catalog of the family that owns `suite` (the default family
    without one). Each family's `select` says what its kinds pick: for LIBERO, `fast`
    is `suite` (default libero_10) tasks `task_ids` (default 0,1) once, `development`
    LIBERO-10 tasks 0-4, `task_coverage` the given tasks once, `all` the 130 standard
    entries once, `canonical` every task x its 50 released initial states, seed 7.
    `init_states` (task_coverage only) runs each selected task from each of those
    released states instead of state 0 alone, for any family (`catalog.plan_states`).
    `options` are a family's own (a LIBERO-Plus `category`, a LIBERO-Para `cell`).
    Unknown suites and task indices raise the catalog's typed lookup errors.
    """
    checked = plan_kind(kind)
    if init_states is not None and checked != "task_coverage":
        raise PlanOptionError(
            f"plan kind {checked!r} takes no init states: give them to a task_coverage plan"
        )
    chosen = family(DEFAULT_BENCHMARK) if suite is None else family_of_suite(suite)
    selection = chosen.select(checked, suite, task_ids, _checked_options(chosen, options))
    if init_states is not None:
        selection = with_states(
            selection,
            init_states,
            lambda case: chosen.entry(case.suite, case.task_index).n_init_states,
            chosen.title,
        )
    body: dict[str, Any] = {
        "schema": PLAN_SCHEMA,
        "kind": checked,
        "label": selection.label,
        "description": selection.description,
        "canonical_protocol": checked == "canonical",
        "benchmark": chosen.name,
        "catalog_sha256": chosen.catalog_sha256(),
        "attempts_per_case": 1,
        "cases": [c.model_dump() for c in selection.cases],
    }
    body["plan_sha256"] = content_sha256(body)
    try:
        return Plan.model_validate(body)
    except ValidationError as exc:  # a selection too long to describe, say
        raise PlanOptionError(f"the selection makes no valid plan: {_problems(exc)}") from exc


def _problems(exc: ValidationError) -> str:
    return "; ".join(
        f"{'/'.join(str(p) for p in e['loc']) or '<root>'}: {e['msg']}" for e in exc.errors()
    )


def _no_duplicate_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    result: dict[str, Any] = {}
    for key, value in pairs:
        if key in result:
            raise PlanInvalidError(f"duplicate key {key!r}")
        result[key] = value
    return result


def _no_constants(name: str) -> Any:
    raise PlanInvalidError(f"{name} is not JSON")


def parse_plan(data: bytes, *, check_catalog: bool = True) -> Plan:
    """Validate bytes as a plan of any version: JSON, its version's schema, hash, the
    current model, its family, then (unless told not to) the installed catalog."""
    if len(data) > MAX_PLAN_BYTES:
        raise PlanInvalidError(f"a plan is at most {MAX_PLAN_BYTES} bytes")
    try:
        document = json.loads(
            data.decode("utf-8"),
            object_pairs_hook=_no_duplicate_keys,
            parse_constant=_no_constants,
        )
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise PlanInvalidError(f"not a UTF-8 JSON document: {exc}") from exc
    plan = _upgraded(document)
    chosen = _family_of(plan)
    if check_catalog:
        _check_against_catalog(plan, chosen)
    return plan


def _upgraded(document: object) -> Plan:
    """The plan `document` is, as the current version. Its hash is recomputed over the
    document as written, whatever its version; the upgraded plan keeps that hash."""
    try:
        upgraded = upgraded_document(PLAN_HISTORY, document)
    except RecordRefusedError as exc:
        raise PlanRefusedError(exc.kind, exc.version, exc.problem) from exc
    written = cast(dict[str, Any], document)  # an object: its version's schema accepted it
    recomputed = content_sha256(written)
    if recomputed != written["plan_sha256"]:
        raise PlanHashMismatchError(
            f"plan_sha256 is {written['plan_sha256']} but the content hashes to {recomputed}: "
            "the plan was changed after it was built"
        )
    try:
        return Plan.model_validate(upgraded)
    except ValidationError as exc:
        raise PlanRefusedError(PLAN_HISTORY.kind, written["schema"], _problems(exc)) from exc


def _family_of(plan: Plan) -> BenchmarkFamily:
    """The registered family a plan names (an earlier version's schema names only the
    families its plans could have)."""
    try:
        return family(plan.benchmark)
    except UnknownBenchmarkError as exc:
        raise PlanInvalidError(str(exc)) from exc


def _check_against_catalog(plan: Plan, chosen: BenchmarkFamily) -> None:
    try:
        installed = chosen.catalog_sha256()
        current = chosen.is_current_catalog(plan.catalog_sha256)
    except CatalogError as exc:  # a local copy not declared or unreadable
        raise PlanCatalogMismatchError(f"the plan's catalog cannot be checked: {exc}") from exc
    if not current:
        raise PlanCatalogMismatchError(
            f"the plan was built against catalog {plan.catalog_sha256}, "
            f"the installed catalog is {installed}: rebuild the plan"
        )
    for n, case in enumerate(plan.cases):
        try:
            owner = family_of_suite(case.suite)
            entry = owner.entry(case.suite, case.task_index)
        except KeyError as exc:
            raise PlanInvalidError(f"case {n}: {exc}") from exc
        if owner.name != case.benchmark or entry.benchmark != case.benchmark:
            raise PlanInvalidError(f"case {n}: {case.suite} belongs to {owner.name}")
        if case.init_state_index >= entry.n_init_states:
            raise PlanInvalidError(
                f"case {n}: {case.suite} task {case.task_index} has "
                f"{entry.n_init_states} released initial states, not {case.init_state_index + 1}"
            )


def load_plan(path: Path, *, check_catalog: bool = True) -> Plan:
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise PlanInvalidError(f"cannot read plan {path}: {exc.strerror or exc}") from exc
    return parse_plan(data, check_catalog=check_catalog)
