"""LIBERO-Para: paraphrased LIBERO-Goal instructions from a local copy the user declares
(`--para-dir`), catalogued per run and kept with it, reported by paraphrase cell."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path

from mailroom.benchmarks.libero.family import (
    LIBERO_NAMES,
    LIBERO_PACKAGES,
    LiberoStates,
    libero_private_names,
    libero_reference_horizon,
)
from mailroom.benchmarks.libero_para.local_copy import (
    GOAL_SUITE,
    NO_CELL,
    PARA_CATALOG_FILE,
    PARA_DIR_VARIABLE,
    PARA_SUITE,
    ParaCatalog,
    ParaCopyError,
    ParaEntry,
    ParaSource,
    cell_of,
    goal_task_of,
    para_catalog_sha256,
    parse_para_catalog,
    render_para,
)
from mailroom.hashing import sha256_bytes
from mailroom.orchestrator.catalog.cases import Case
from mailroom.orchestrator.catalog.entries import CatalogEntry, CatalogError, ReferenceHorizon
from mailroom.orchestrator.catalog.plans import (
    CANONICAL_INIT_STATES,
    CANONICAL_SEED,
    ONCE_NOTE,
    PlanOptionError,
    Selection,
    cases_canonical,
    cases_once,
    format_ids,
    refuse_options,
    unique_ids,
)
from mailroom.orchestrator.families.base import LocalCopy, Packages, PlanOption, PrivateNames
from mailroom.orchestrator.sim.base import Simulator, SimulatorFactory, TaskIdentity
from rich.console import Console


def select_para(
    catalog: ParaCatalog, kind: str, task_ids: Sequence[int] | None, cell: str | None
) -> Selection:
    """LIBERO-Para plans over `catalog` (the declared copy's): by cell and by LIBERO-Goal
    task (its ids, 0-9), each paraphrase run on its Goal task's scene and released states."""
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


def open_para_simulator(*, control_cap: int, proprio: bool) -> Simulator:
    """The LIBERO adapter resolving LIBERO-Para paraphrases, imported only in a worker."""
    from mailroom.benchmarks.libero_para.scene import open_para

    return open_para(control_cap=control_cap, proprio=proprio)


class ParaFamily(LiberoStates):
    name = "libero_para"
    title = "LIBERO-Para"
    adapter = "libero"
    public_names = LIBERO_NAMES
    plan_options = (PlanOption("cell", "the paraphrase-type cell (the copy's folder)"),)
    local_copy = LocalCopy(
        "para-dir",
        "A local LIBERO-Para copy (a folder of BDDL files; docs/liberopara.md).",
        PARA_DIR_VARIABLE,
    )

    def __init__(self) -> None:
        self.source = ParaSource()

    def declare_local_copy(self, directory: Path) -> None:
        self.source.declare(directory)

    packages: Packages = LIBERO_PACKAGES
    kept_catalog_file: str | None = PARA_CATALOG_FILE

    def suites(self) -> Sequence[str]:
        return (PARA_SUITE,)

    def owns(self, suite: str) -> bool:
        return suite == PARA_SUITE

    def entry(self, suite: str, task_index: int) -> CatalogEntry:
        return self.source.catalog().entry(task_index)

    def catalog_sha256(self) -> str:
        return para_catalog_sha256(self.source.catalog())

    def is_current_catalog(self, sha256: str) -> bool:
        return sha256 == self.catalog_sha256()

    def reference_horizon(self, suite: str) -> ReferenceHorizon:
        return libero_reference_horizon(GOAL_SUITE)

    def select(
        self,
        kind: str,
        suite: str | None,
        task_ids: Sequence[int] | None,
        options: Mapping[str, str],
    ) -> Selection:
        return select_para(self.source.catalog(), kind, task_ids, options.get("cell"))

    def report_group(self, case: Case, task_name: str | None) -> str | None:
        if task_name is not None:
            return cell_of(task_name)
        try:
            return self.source.catalog().entry(case.task_index).cell or NO_CELL
        except CatalogError:  # no copy declared: a case without a result has no known cell
            return "unknown"

    def private_names(self, entry: CatalogEntry) -> PrivateNames:
        names = libero_private_names(entry)
        if not isinstance(entry, ParaEntry):
            return names
        # The paraphrase's file in the copy, and the Goal task it paraphrases.
        return PrivateNames(
            names.task_names | {goal_task_of(entry.task_name)},
            names.file_names | {Path(entry.para_path).name},
        )

    def private_paths(self) -> tuple[Path, ...]:
        declared = self.source.declared
        return () if declared is None else (declared,)

    def kept_catalog(self) -> bytes | None:
        return render_para(self.source.catalog())

    def pin_kept_catalog(self, data: bytes, recorded_sha256: str) -> None:
        if sha256_bytes(data) != recorded_sha256:
            raise ParaCopyError(
                f"the kept {PARA_CATALOG_FILE} does not hash to the catalog the run records"
            )
        try:
            catalog = parse_para_catalog(data)
        except ValueError as exc:
            raise ParaCopyError(f"the kept {PARA_CATALOG_FILE} cannot be read: {exc}") from exc
        self.source.pin(catalog)

    def check_local_copy(self, task_indices: Iterable[int]) -> None:
        self.source.check_copy(task_indices)

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
        from mailroom.benchmarks.libero_para.catalog_view import show_para_catalog

        show_para_catalog(console, write_json, self.source.declared_dir(), as_json)

    def simulator_factory(self) -> SimulatorFactory:
        return open_para_simulator

    def resolve_task(self, suite: str, task_index: int, task_order_index: int) -> TaskIdentity:
        from mailroom.benchmarks.libero_para.scene import resolve_para_task

        return resolve_para_task(task_index, task_order_index)


LIBERO_PARA = ParaFamily()
