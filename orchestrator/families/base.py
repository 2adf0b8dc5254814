"""What a benchmark family declares, catalog side and simulator side, behind one Protocol.

A family is a set of suites that share a catalog, a way of selecting plans and a
simulator: LIBERO, LIBERO-PRO, LIBERO-Plus and LIBERO-Para are the built-in ones, and a
third party adds its own through the `mailroom.benchmarks` entry-point group
(`families.registry`). Everything outside a family's own module asks the registry, never
a family or suite name, what a suite means: its entries, hashes and horizons, how a plan
selects from it, how the report groups it, which names the audit treats as private, what
catalog a run keeps, which simulator runs it and which packages it rests on.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol, runtime_checkable

from mailroom.orchestrator.catalog.cases import Case
from mailroom.orchestrator.catalog.entries import CatalogEntry, CatalogError, ReferenceHorizon
from mailroom.orchestrator.catalog.plans import Selection
from mailroom.orchestrator.sim.base import SimulatorFactory, TaskIdentity
from mailroom.orchestrator.sim.specs import ActionSpec, ObservationSpec
from rich.console import Console


@dataclass(frozen=True)
class PrivateNames:
    """Names an entry's task goes by that an actor must never be handed (its task names,
    the file names its scene is built from), beyond the suite and benchmark names."""

    task_names: frozenset[str] = frozenset()
    file_names: frozenset[str] = frozenset()


@dataclass(frozen=True)
class Packages:
    """What a family's runs rest on, by distribution and by import name.

    `recorded`: distributions whose versions a run's manifest records. `simulation`: those
    among them whose versions decide what the simulator computes (a replay on others is
    drift, not tampering). `recorded_since`: distributions manifests recorded only from
    some point on, so an older manifest's silence about them is no drift. `modules`:
    import names whose installed folders an actor must never see (the sandbox's deny
    list: task files, initial states)."""

    recorded: tuple[str, ...] = ()
    simulation: tuple[str, ...] = ()
    recorded_since: tuple[str, ...] = ()
    modules: tuple[str, ...] = ()


@dataclass(frozen=True)
class PlanOption:
    """A selection option a family's plans take beyond kind, suite and task ids (a
    LIBERO-Plus category, a LIBERO-Para cell): its name as a keyword and its help."""

    name: str
    help: str
    choices: tuple[str, ...] | None = None


@dataclass(frozen=True)
class LocalCopy:
    """Data a family reads from a folder the user has (a data set no package index
    carries): the command-line option that declares it (`--<option> DIR`, given to every
    command that reads the family's cases), its help, and the environment variable a
    user may set instead (read by the command line only, never written)."""

    option: str
    help: str
    environment: str | None = None


@runtime_checkable
class BenchmarkFamily(Protocol):
    """One benchmark family. `name` is the `benchmark` its plans, cases and results name."""

    @property
    def name(self) -> str: ...

    @property
    def title(self) -> str:
        """How people write its name (LIBERO-Plus)."""
        ...

    @property
    def adapter(self) -> str:
        """The simulator adapter a run's manifest names (`protocol.adapter`)."""
        ...

    @property
    def public_names(self) -> tuple[str, ...]:
        """Words the audit reads as this benchmark's name (lowercase, matched at a word's
        start): handing one to an actor is a leak; an actor writing one is information
        (it may recognise public scenes). `libero` for the LIBERO families."""
        ...

    @property
    def plan_options(self) -> tuple[PlanOption, ...]: ...

    @property
    def action_spec(self) -> ActionSpec:
        """The action vector its actors send."""
        ...

    @property
    def observation_spec(self) -> ObservationSpec:
        """What each observation delivers to its actors."""
        ...

    @property
    def actor_guide(self) -> str | None:
        """For a family of mailbox protocol v2 (`sim/specs.py`), what its actors are told of
        its actions and cameras (each component, its units and direction, what each
        camera shows): the instructions carry it under THIS ROBOT. None for a family of
        protocol v1, whose instruction texts describe it already."""
        ...

    @property
    def local_copy(self) -> LocalCopy | None:
        """The local copy this family reads, None for a family whose data is installed."""
        ...

    def declare_local_copy(self, directory: Path) -> None:
        """The copy at `directory` is the one this command (and the workers it starts)
        reads; a family without a local copy raises a `CatalogError`."""
        ...

    @property
    def packages(self) -> Packages: ...

    # catalog side

    def suites(self) -> Sequence[str]:
        """The suites this family owns, in the order its catalog lists them."""
        ...

    def owns(self, suite: str) -> bool: ...

    def entry(self, suite: str, task_index: int) -> CatalogEntry:
        """A suite's entry; unknown suites and indices raise the catalog's typed errors."""
        ...

    def catalog_sha256(self) -> str:
        """The hash of the catalog its plans are built against and its runs record."""
        ...

    def is_current_catalog(self, sha256: str) -> bool:
        """A plan built against `sha256` still runs on the installed catalog."""
        ...

    def reference_horizon(self, suite: str) -> ReferenceHorizon: ...

    def select(
        self,
        kind: str,
        suite: str | None,
        task_ids: Sequence[int] | None,
        options: Mapping[str, str],
    ) -> Selection:
        """The cases of a plan kind; `options` holds only names from `plan_options`."""
        ...

    def report_group(self, case: Case, task_name: str | None) -> str | None:
        """The group a case is also reported in (a category, a cell), None for none;
        `task_name` is the one its result recorded, when it has one."""
        ...

    def private_names(self, entry: CatalogEntry) -> PrivateNames: ...

    def private_paths(self) -> tuple[Path, ...]:
        """Further folders an actor must never see (a declared local copy)."""
        ...

    # The catalog a run keeps: a family whose catalog is made from something outside the
    # installed package (a local copy) keeps it beside the run's manifest at the first
    # launch, and every executor and later reader resolves the run's cases against it.

    @property
    def kept_catalog_file(self) -> str | None:
        """The file in the run directory a run keeps its catalog under; None: a run of
        this family keeps nothing (its catalog is frozen in the installed package)."""
        ...

    def kept_catalog(self) -> bytes | None:
        """The bytes a new run keeps at its first launch (its manifest records their
        sha256 as `protocol.catalog_sha256`); None where `kept_catalog_file` is None."""
        ...

    def pin_kept_catalog(self, data: bytes, recorded_sha256: str) -> None:
        """From now on this process resolves the family's cases against `data`, a run's
        kept catalog, which must hash to `recorded_sha256` (else a `CatalogError`)."""
        ...

    def check_local_copy(self, task_indices: Iterable[int]) -> None:
        """Where the family reads a local copy the user declared, each named entry's file
        in it must still be what the pinned catalog recorded (a launch, resume or replay
        checks before any worker starts; workers never read the copy). Nothing to check
        for a family whose files are installed packages."""
        ...

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
        """`mailroom catalog` for this family: its entries (one suite's with `suite`) as a
        table on `console`, or as one JSON document through `write_json`. A family that
        shares its catalog with another shows the whole catalog unless
        `only_this_family`. Usage problems raise the catalog's typed errors."""
        ...

    # simulator side

    def simulator_factory(self) -> SimulatorFactory:
        """Builds a worker's simulator for this family's cases (a module-level callable,
        so it crosses a process spawn)."""
        ...

    def resolve_task(self, suite: str, task_index: int, task_order_index: int) -> TaskIdentity:
        """A case's task identity without building a simulator (an interrupted attempt's)."""
        ...

    def state_sha256(self, identity: TaskIdentity, init_state_index: int) -> str: ...


class KeepsNothing:
    """What a family whose catalog is frozen in an installed package shares: a run of it
    keeps no catalog, and it reads no local copy to check or to hide from actors."""

    title: str
    kept_catalog_file: str | None = None
    local_copy: LocalCopy | None = None

    def declare_local_copy(self, directory: Path) -> None:
        raise CatalogError(f"{self.title} reads no local copy")

    def kept_catalog(self) -> bytes | None:
        return None

    def pin_kept_catalog(self, data: bytes, recorded_sha256: str) -> None:
        raise CatalogError(f"a {self.title} run keeps no catalog of its own")

    def check_local_copy(self, task_indices: Iterable[int]) -> None:
        return None

    def private_paths(self) -> tuple[Path, ...]:
        return ()


class UnknownBenchmarkError(LookupError):
    """No registered family has this name or owns this suite."""

    def __str__(self) -> str:  # LookupError would quote the message
        return str(self.args[0]) if self.args else ""
