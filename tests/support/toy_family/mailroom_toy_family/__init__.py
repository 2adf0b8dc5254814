"""Two toy benchmark families, installed as their own distribution: each a tiny catalog
of two tasks and a fake simulator (mailroom's deterministic `FakeSimulator`, resolving
the family's tasks). mailroom knows nothing of them beyond the `mailroom.benchmarks`
entry point: plan, launch, report, audit, view and replay must work through the registry.

Each has a shape of its own, both with one overhead camera of 64 pixels a side and two
settling controls:
- `toyworld`: a 10 Hz OSC_POSE controller whose seven components have names of their
  own, so its actors speak mailbox protocol v1;
- `toyreach`: a 10 Hz velocity controller of four components in [-2, 2], so its actors
  speak protocol v2, with the guide that tells them what each component does."""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
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

HORIZON = 40
ONE_CAMERA = ObservationSpec(
    cameras=("overhead",),
    image_size=64,
    settling_controls=2,
    proprio=(("joint_pos", 7), ("gripper_qpos", 2)),
    camera_transform="none",
)
# Private: the names an actor must never be handed (the audit must flag each).
TOYWORLD_TASKS = (
    ("TOYSHELF_SCENE7_stack_the_teal_cube_on_the_crate", "stack the teal cube on the crate"),
    ("TOYSHELF_SCENE7_put_the_plum_in_the_tray", "put the plum in the tray"),
)
TOYWORLD_ACTION = ActionSpec(
    layout=("vx", "vy", "vz", "wx", "wy", "wz", "grip"),
    low=-1.0,
    high=1.0,
    controller="OSC_POSE",
    control_hz=10,
)
TOYREACH_TASKS = (
    ("TOYTABLE_SCENE3_push_the_amber_puck_to_the_line", "push the amber puck to the line"),
    ("TOYTABLE_SCENE3_lift_the_pear_off_the_table", "lift the pear off the table"),
)
TOYREACH_ACTION = ActionSpec(
    layout=("vx", "vy", "vz", "grip"),
    low=-2.0,
    high=2.0,
    controller="velocity",
    control_hz=10,
)
TOYREACH_GUIDE = """A toy gripper over a table, moved by velocity.
- [0], [1], [2] ("vx", "vy", "vz"): the gripper's velocity along x, y, z, in
  centimetres a control; 0 holds it still.
- [3] ("grip"): -2 opens the gripper fully, +2 closes it fully.
- "overhead" looks straight down at the table; +x is image UP, +y is image LEFT.
- "proprio", when a run includes it: "joint_pos", the arm's 7 joint angles in radians,
  and "gripper_qpos", the two fingers' positions in metres."""


def _sha(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def _entry(benchmark: str, suite: str, index: int, name: str, instruction: str) -> CatalogEntry:
    return CatalogEntry.model_validate(
        {
            "benchmark": benchmark,
            "suite": suite,
            "base_suite": suite,
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


def _identity(entry: CatalogEntry, task_order_index: int) -> TaskIdentity:
    return TaskIdentity(
        benchmark=entry.benchmark,
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
    """mailroom's fake simulator, resolving its family's tasks; native success from the
    third control on, so an episode can succeed."""

    def __init__(self, family: ToyFamily, *, control_cap: int, proprio: bool = False) -> None:
        super().__init__(
            control_cap=control_cap,
            proprio=proprio,
            succeed_at=3,
            observation=family.observation_spec,
        )
        self._family = family

    def resolve_task(self, suite: str, task_index: int, task_order_index: int) -> TaskIdentity:
        return _identity(self._family.entry(suite, task_index), task_order_index)


@dataclass(frozen=True)
class _ToyFactory:
    family: ToyFamily

    def __call__(self, *, control_cap: int, proprio: bool) -> Simulator:
        return ToySimulator(self.family, control_cap=control_cap, proprio=proprio)


class ToyFamily:
    adapter = "toy_fake"
    plan_options: tuple[PlanOption, ...] = ()
    packages = Packages(modules=("mailroom_toy_family",))
    kept_catalog_file: str | None = None
    local_copy: LocalCopy | None = None
    observation_spec = ONE_CAMERA

    def __init__(
        self,
        name: str,
        suite: str,
        tasks: tuple[tuple[str, str], ...],
        action: ActionSpec,
        actor_guide: str | None,
    ) -> None:
        self.name = name
        self.title = name.capitalize()
        self.public_names = (name,)
        self.suite = suite
        self.action_spec = action
        self.actor_guide = actor_guide
        self.entries = tuple(
            _entry(name, suite, i, task, instruction) for i, (task, instruction) in enumerate(tasks)
        )
        self.sha256 = _sha("\n".join(f"{e.task_name}\t{e.instruction}" for e in self.entries))

    def declare_local_copy(self, directory: Path) -> None:
        raise ValueError("the toy family reads no local copy")

    def suites(self) -> Sequence[str]:
        return (self.suite,)

    def owns(self, suite: str) -> bool:
        return suite == self.suite

    def entry(self, suite: str, task_index: int) -> CatalogEntry:
        if suite != self.suite:
            raise UnknownSuiteError(f"unknown suite {suite!r}; the toy catalog has: {self.suite}")
        if not 0 <= task_index < len(self.entries):
            raise TaskIndexError(f"{self.suite} has no task index {task_index}")
        return self.entries[task_index]

    def catalog_sha256(self) -> str:
        return self.sha256

    def is_current_catalog(self, sha256: str) -> bool:
        return sha256 == self.sha256

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
        entries = [self.entry(self.suite, i) for i in ids]
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
            "catalog_sha256": self.sha256,
            "entries": [e.model_dump(mode="json") for e in self.entries],
        }
        if as_json:
            write_json(document)
        else:
            for e in self.entries:
                console.print(f"{e.suite} {e.task_index} {e.instruction}")

    def simulator_factory(self) -> SimulatorFactory:
        return _ToyFactory(self)

    def resolve_task(self, suite: str, task_index: int, task_order_index: int) -> TaskIdentity:
        return _identity(self.entry(suite, task_index), task_order_index)

    def state_sha256(self, identity: TaskIdentity, init_state_index: int) -> str:
        return _sha(f"{identity.task_name}/{init_state_index}")


TOYWORLD = ToyFamily("toyworld", "toyworld_shelf", TOYWORLD_TASKS, TOYWORLD_ACTION, None)
TOYREACH = ToyFamily("toyreach", "toyreach_table", TOYREACH_TASKS, TOYREACH_ACTION, TOYREACH_GUIDE)
