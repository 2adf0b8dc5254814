"""A toy benchmark family, installed as its own distribution: two shelves of tasks in a
tiny catalog and a fake simulator (mailroom's deterministic `FakeSimulator`, resolving
this family's tasks). mailroom knows nothing of it beyond the `mailroom.benchmarks` entry
point: plan, launch, report, audit, view and replay must work through the registry.

Its shape is its own: one overhead camera of 64 pixels a side, two settling controls,
a 10 Hz controller whose seven components have names of their own."""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from mailroom.orchestrator.catalog.cases import Case
from mailroom.orchestrator.catalog.entries import (
    CatalogEntry,
    ReferenceHorizon,
    TaskIndexError,
    UnknownSuiteError,
)
from mailroom.orchestrator.catalog.plans import (
    Selection,
    cases_once,
    format_ids,
    plan_kind,
    unique_ids,
)
from mailroom.orchestrator.families.base import LocalCopy, Packages, PlanOption, PrivateNames
from mailroom.orchestrator.sim.base import Simulator, SimulatorFactory, TaskIdentity
from mailroom.orchestrator.sim.fake import FakeSimulator
from mailroom.orchestrator.sim.specs import ActionSpec, ObservationSpec
from rich.console import Console

SUITE = "toyworld_shelf"
# Private: the names an actor must never be handed (the audit must flag each).
TASKS = (
    ("TOYSHELF_SCENE7_stack_the_teal_cube_on_the_crate", "stack the teal cube on the crate"),
    ("TOYSHELF_SCENE7_put_the_plum_in_the_tray", "put the plum in the tray"),
)
HORIZON = 40
TOY_ACTION = ActionSpec(
    layout=("vx", "vy", "vz", "wx", "wy", "wz", "grip"),
    low=-1.0,
    high=1.0,
    controller="OSC_POSE",
    control_hz=10,
)
TOY_OBSERVATION = ObservationSpec(
    cameras=("overhead",),
    image_size=64,
    settling_controls=2,
    proprio=(("joint_pos", 7), ("gripper_qpos", 2)),
)


def _sha(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def _entry(index: int) -> CatalogEntry:
    name, instruction = TASKS[index]
    return CatalogEntry.model_validate(
        {
            "benchmark": "toyworld",
            "suite": SUITE,
            "base_suite": SUITE,
            "task_index": index,
            "task_name": name,
            "instruction": instruction,
            "instruction_source": "task.language",
            "task_language": instruction,
            "bddl_language": instruction,
            "bddl_path": f"shelves/{name.lower()}.toyscene",
            "bddl_sha256": _sha(name),
            "init_states_path": f"shelves/{name.lower()}.states",
            "init_states_sha256": _sha(name + "/states"),
            "n_init_states": 3,
            "state_dim": 9,
            "horizon": HORIZON,
            "horizon_source": "the toy family's own horizon",
        }
    )


ENTRIES = tuple(_entry(i) for i in range(len(TASKS)))
CATALOG_SHA256 = _sha("\n".join(f"{e.task_name}\t{e.instruction}" for e in ENTRIES))


def _identity(entry: CatalogEntry, task_order_index: int) -> TaskIdentity:
    return TaskIdentity(
        benchmark="toyworld",
        suite=entry.suite,
        task_index=entry.task_index,
        task_order_index=task_order_index,
        task_name=entry.task_name,
        instruction=entry.instruction,
        bddl_path=Path(entry.bddl_path),
        init_states_path=Path(entry.init_states_path),
        bddl_sha256=entry.bddl_sha256,
        init_states_sha256=entry.init_states_sha256,
        n_init_states=entry.n_init_states,
    )


class ToySimulator(FakeSimulator):
    """mailroom's fake simulator, resolving this family's tasks; native success from the
    third control on, so an episode can succeed."""

    def __init__(self, *, control_cap: int, proprio: bool = False) -> None:
        super().__init__(
            control_cap=control_cap, proprio=proprio, succeed_at=3, observation=TOY_OBSERVATION
        )

    def resolve_task(self, suite: str, task_index: int, task_order_index: int) -> TaskIdentity:
        return _identity(TOYWORLD.entry(suite, task_index), task_order_index)


def open_toy(*, control_cap: int, proprio: bool) -> Simulator:
    return ToySimulator(control_cap=control_cap, proprio=proprio)


class ToyFamily:
    name = "toyworld"
    title = "Toyworld"
    adapter = "toy_fake"
    public_names = ("toyworld",)
    plan_options: tuple[PlanOption, ...] = ()
    packages = Packages(modules=("mailroom_toy_family",))
    kept_catalog_file: str | None = None
    local_copy: LocalCopy | None = None
    action_spec = TOY_ACTION
    observation_spec = TOY_OBSERVATION

    def declare_local_copy(self, directory: Path) -> None:
        raise ValueError("the toy family reads no local copy")

    def suites(self) -> Sequence[str]:
        return (SUITE,)

    def owns(self, suite: str) -> bool:
        return suite == SUITE

    def entry(self, suite: str, task_index: int) -> CatalogEntry:
        if suite != SUITE:
            raise UnknownSuiteError(f"unknown suite {suite!r}; the toy catalog has: {SUITE}")
        if not 0 <= task_index < len(ENTRIES):
            raise TaskIndexError(f"{SUITE} has no task index {task_index}")
        return ENTRIES[task_index]

    def catalog_sha256(self) -> str:
        return CATALOG_SHA256

    def is_current_catalog(self, sha256: str) -> bool:
        return sha256 == CATALOG_SHA256

    def reference_horizon(self, suite: str) -> ReferenceHorizon:
        return ReferenceHorizon(HORIZON, "the toy family's own horizon")

    def select(
        self,
        kind: str,
        suite: str | None,
        task_ids: Sequence[int] | None,
        options: Mapping[str, str],
    ) -> Selection:
        plan_kind(kind)
        ids = list(unique_ids(task_ids)) if task_ids is not None else [0, 1]
        entries = [self.entry(SUITE, i) for i in ids]
        return Selection(
            label=f"{kind}: toy tasks {format_ids(ids)}, each once",
            description=f"A toy plan: tasks {format_ids(ids)}, each once.",
            cases=cases_once(entries),
        )

    def report_group(self, case: Case, task_name: str | None) -> str | None:
        return None

    def private_names(self, entry: CatalogEntry) -> PrivateNames:
        return PrivateNames(frozenset({entry.task_name}), frozenset({Path(entry.bddl_path).name}))

    def private_paths(self) -> tuple[Path, ...]:
        return ()

    def kept_catalog(self) -> bytes | None:
        return None

    def pin_kept_catalog(self, data: bytes, recorded_sha256: str) -> None:
        raise ValueError("a toy run keeps no catalog")

    def check_local_copy(self, task_indices: Iterable[int]) -> None:
        return None

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
        document: dict[str, Any] = {
            "catalog_sha256": CATALOG_SHA256,
            "entries": [e.model_dump(mode="json") for e in ENTRIES],
        }
        if as_json:
            write_json(document)
        else:
            for e in ENTRIES:
                console.print(f"{e.suite} {e.task_index} {e.instruction}")

    def simulator_factory(self) -> SimulatorFactory:
        return open_toy

    def resolve_task(self, suite: str, task_index: int, task_order_index: int) -> TaskIdentity:
        return _identity(self.entry(suite, task_index), task_order_index)

    def state_sha256(self, identity: TaskIdentity, init_state_index: int) -> str:
        return _sha(f"{identity.task_name}/{init_state_index}")


TOYWORLD = ToyFamily()
