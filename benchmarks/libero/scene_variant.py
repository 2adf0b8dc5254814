"""How a family that extends LIBERO changes a task's scene in the LIBERO adapter.

A task identity's `perturbation` is the extending family's own object; the adapter
reaches it only through this Protocol, so LIBERO knows no family built on it (LIBERO-Plus
implements it in `libero_plus/perturbation.py`).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Protocol, runtime_checkable

import numpy as np
import numpy.typing as npt
from mailroom.orchestrator.sim.base import Image, TaskIdentity


@runtime_checkable
class SceneVariant(Protocol):
    @property
    def env_name(self) -> Path:
        """The name the package's env is built from: two tasks share an env only when
        they share this name."""
        ...

    @property
    def noisy(self) -> bool:
        """Whether delivered images are changed per frame (`agentview`)."""
        ...

    def load_states(self, identity: TaskIdentity) -> npt.NDArray[np.float64]:
        """The task's released initial states."""
        ...

    def build_env(self, identity: TaskIdentity, *, image_size: int, horizon: int) -> Any:
        """The env the task runs in, its instruction checked against the catalog."""
        ...

    def after_released_state(self, env: Any) -> None:
        """What the variant puts back once the released state is installed."""
        ...

    def agentview(self, raw: Any, seed: int, control: int) -> Image:
        """The raw (bottom-up) agentview image of the frame after `control` controls of
        an episode of `seed`, as the variant delivers it."""
        ...


def scene_variant(identity: TaskIdentity) -> SceneVariant | None:
    """The identity's variant, or None for a task of LIBERO's own."""
    variant = identity.perturbation
    if variant is None:
        return None
    if not isinstance(variant, SceneVariant):
        raise TypeError(f"{identity.task_name}: {type(variant).__name__} is no scene variant")
    return variant
