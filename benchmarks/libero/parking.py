"""An episode's state in a LIBERO env as values: taken out (parked) and put back.

Several episodes of one task share one env: each decision restores its episode, runs
the chunk and parks it again. What an episode's future depends on, found by probing
(shared/LIBERO_FACTS.md, "Parking an episode's simulator state"):

- MuJoCo's integration state (`mj_getState` with `mjSTATE_INTEGRATION`: time, qpos,
  qvel, act, `qacc_warmstart`, ctrl, applied forces, equality flags, mocap, user data,
  plugin state). It is set back with `mj_setState` and never followed by `mj_forward`:
  that would overwrite `qacc_warmstart`, and the run drifts. `env.step` starts with a
  forward of its own.
- The model fields an episode changed: a reset places fixtures by writing `body_pos`
  and `body_quat`, the stove's flame toggles `site_rgba`. Every non-asset model array
  is compared with the scene's pristine compiled model at each park, and those that
  differ are parked with the episode, whichever they are. Asset arrays (meshes,
  textures, height fields, BVH) are compared only when an episode starts (`verify`);
  one that differs there makes the episode unparkable.
- Python values: robosuite's `timestep`, `cur_time` and `done`, the OSC controller's
  goals (`goal_pos`, `goal_ori`) and the rest of its arrays and scalars, the gripper's
  ramped `current_action`, and the arm's own arrays and scalars. Values, never object
  references: a hard reset replaces the simulator, robot, controller and gripper.

Reads outside a step (goal predicates) see the previous tenant's derived data after a
restore: nothing here answers them for a parked episode.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt
from mailroom.orchestrator.sim.base import NotParkableError

# Model arrays that hold an asset's data: compared when an episode starts, not parked.
# `tex_data` is never compared: its pages are given back to the kernel once the render
# context holds them (`LiberoAdapter._give_back_memory`), and no task code writes it.
ASSET_PREFIXES = ("tex_", "mesh_", "bvh_", "hfield_", "skin_", "flex_")
UNCOMPARED = frozenset({"tex_data"})
# Types of the Python values taken from the robot, its controller and its gripper.
_VALUE_TYPES = (np.ndarray, float, int, bool, np.floating, np.integer, np.bool_, type(None))


@functools.cache
def _model_array_names(model_type: type) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """The model's array fields: (parked, asset), by name, once per model type."""
    import mujoco

    probe = mujoco.MjModel.from_xml_string("<mujoco/>")
    names = [
        name
        for name in dir(probe)
        if not name.startswith("_") and isinstance(getattr(probe, name, None), np.ndarray)
    ]
    assets = tuple(n for n in names if n.startswith(ASSET_PREFIXES) and n not in UNCOMPARED)
    parked = tuple(n for n in names if not n.startswith(ASSET_PREFIXES) and n not in UNCOMPARED)
    return parked, assets


def model_fields() -> tuple[tuple[str, ...], tuple[str, ...]]:
    import mujoco

    return _model_array_names(mujoco.MjModel)


def differing_fields(model: Any, pristine: Any, names: tuple[str, ...]) -> list[str]:
    """The named model arrays whose values differ from the pristine model's."""
    return [n for n in names if not np.array_equal(getattr(model, n), getattr(pristine, n))]


@dataclass(frozen=True)
class ParkedLibero:
    """One LIBERO episode taken out of its env. `scene_key` names the compiled model it
    belongs to: it is put back only into an env of that model."""

    scene_key: str
    physics: npt.NDArray[np.float64]
    model_delta: dict[str, npt.NDArray[Any]]
    env_values: tuple[int, float, bool]
    robot_values: dict[str, dict[str, Any]]
    adapter_values: dict[str, Any]

    @property
    def nbytes(self) -> int:
        arrays = [self.physics, *self.model_delta.values()]
        for values in self.robot_values.values():
            arrays.extend(v for v in values.values() if isinstance(v, np.ndarray))
        return sum(a.nbytes for a in arrays)


def _values_of(obj: Any) -> dict[str, Any]:
    """An object's plain values (arrays copied); objects, lists and strings are left:
    they are the same in every env of one model, or rebuilt from these."""
    return {
        name: value.copy() if isinstance(value, np.ndarray) else value
        for name, value in vars(obj).items()
        if isinstance(value, _VALUE_TYPES)
    }


def _put_values(obj: Any, values: dict[str, Any]) -> None:
    for name, value in values.items():
        setattr(obj, name, value.copy() if isinstance(value, np.ndarray) else value)


def _robot_parts(env: Any) -> dict[str, Any]:
    robot = env.robots[0]
    return {"robot": robot, "controller": robot.controller}


def park_env(
    env: Any,
    pristine: Any,
    scene_key: str,
    adapter_values: dict[str, Any],
    *,
    verify: bool = False,
) -> ParkedLibero:
    """Take the episode running in robosuite env `env` out as values. With `verify`, the
    asset arrays are compared with the pristine model too (when an episode starts)."""
    import mujoco

    model, data = env.sim.model._model, env.sim.data._data
    parked_names, asset_names = model_fields()
    if verify:
        changed = differing_fields(model, pristine, asset_names)
        if changed:
            raise NotParkableError(f"asset arrays differ from the compiled model: {changed}")
    spec = mujoco.mjtState.mjSTATE_INTEGRATION
    physics = np.empty(mujoco.mj_stateSize(model, spec), dtype=np.float64)
    mujoco.mj_getState(model, data, physics, spec)
    delta = {n: getattr(model, n).copy() for n in differing_fields(model, pristine, parked_names)}
    robot_values = {part: _values_of(obj) for part, obj in _robot_parts(env).items()}
    robot_values["gripper"] = {"current_action": env.robots[0].gripper.current_action.copy()}
    return ParkedLibero(
        scene_key=scene_key,
        physics=physics,
        model_delta=delta,
        env_values=(int(env.timestep), float(env.cur_time), bool(env.done)),
        robot_values=robot_values,
        adapter_values=dict(adapter_values),
    )


def unpark_env(env: Any, pristine: Any, parked: ParkedLibero) -> None:
    """Put a parked episode back into `env` (an env of the same compiled model), over
    whatever ran there before. No forward: the next `env.step` starts with one."""
    import mujoco

    model, data = env.sim.model._model, env.sim.data._data
    parked_names, _ = model_fields()
    for name in {*differing_fields(model, pristine, parked_names), *parked.model_delta}:
        source = parked.model_delta.get(name)
        getattr(model, name)[...] = getattr(pristine, name) if source is None else source
    mujoco.mj_setState(model, data, parked.physics, mujoco.mjtState.mjSTATE_INTEGRATION)
    env.timestep, env.cur_time, env.done = parked.env_values
    parts = _robot_parts(env)
    for part, values in parked.robot_values.items():
        if part == "gripper":
            env.robots[0].gripper.current_action = values["current_action"].copy()
        else:
            _put_values(parts[part], values)
