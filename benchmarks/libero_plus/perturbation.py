"""How a LIBERO-Plus task differs from its base task, as the LIBERO adapter applies it."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt
from mailroom.orchestrator.sim.base import Image, TaskIdentity


@dataclass(frozen=True)
class Perturbation:
    """A LIBERO-Plus task's perturbation (a `SceneVariant` of the LIBERO adapter).

    `env_bddl_path` is the name the package's env is given (camera, robot-init and noise
    ride on it); `robot_init` non-zero means the robot starts from a perturbed joint
    pose, re-applied after the released state; `noise` is the package's sensor-noise
    level (0 none), applied to every agentview image delivered or recorded.
    """

    category: str
    env_bddl_path: Path
    robot_init: int
    noise: int

    @property
    def env_name(self) -> Path:
        return self.env_bddl_path

    @property
    def noisy(self) -> bool:
        return self.noise != 0

    def load_states(self, identity: TaskIdentity) -> npt.NDArray[np.float64]:
        from mailroom.benchmarks.libero_plus.scene import load_plus_states

        return load_plus_states(identity)

    def build_env(self, identity: TaskIdentity, *, image_size: int, horizon: int) -> Any:
        from mailroom.benchmarks.libero_plus.scene import build_plus_env

        return build_plus_env(identity, image_size=image_size, horizon=horizon)

    def after_released_state(self, env: Any) -> None:
        if self.robot_init:
            from mailroom.benchmarks.libero_plus.scene import reapply_robot_init

            reapply_robot_init(env)

    def agentview(self, raw: Any, seed: int, control: int) -> Image:
        from mailroom.benchmarks.libero_plus.scene import noise_draws, noised_agentview

        return noised_agentview(raw, self, noise_draws(seed, control))
