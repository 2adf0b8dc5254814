"""LIBERO-Plus sensor noise, the package's own functions run under NumPy 2.

The package pins numpy<2: its motion blur calls `np.fromstring` in binary mode and its
fog `np.float_`, both removed in NumPy 2. Rather than copy its functions, the module's
`np` is replaced by a proxy that restores exactly those two names with their NumPy 1.x
meaning and passes everything else through, so the noise is the package's.
"""

from __future__ import annotations

import contextlib
import functools
import threading
from collections.abc import Iterator
from types import ModuleType
from typing import Any

import numpy as np
import numpy.typing as npt
from mailroom.benchmarks.libero_plus.package_import import import_env_wrapper
from mailroom.orchestrator.sim.base import SimulatorError
from PIL import Image as PILImage

MAX_NOISE_LEVEL = 50


def _fromstring(
    string: Any, dtype: npt.DTypeLike = float, count: int = -1, *, sep: str = ""
) -> npt.NDArray[Any]:
    """NumPy 1.x: binary mode (`sep=""`) reads the bytes like `frombuffer`, as a copy."""
    if sep == "":
        return np.frombuffer(string, dtype=dtype, count=count).copy()
    return np.fromstring(string, dtype=dtype, count=count, sep=sep)


class Numpy2Shim(ModuleType):
    """`numpy` as NumPy 1.x code expects it: `float_` and binary `fromstring` restored."""

    def __init__(self) -> None:
        super().__init__("numpy", "numpy with NumPy 1.x's float_ and binary fromstring")
        self.float_ = np.float64
        self.fromstring = _fromstring

    def __getattr__(self, name: str) -> Any:
        return getattr(np, name)

    def __dir__(self) -> list[str]:
        return sorted(set(dir(np)) | set(self.__dict__))


def install_numpy2_shim(module: ModuleType) -> None:
    """Point `module`'s global `np` at the shim; a second call changes nothing."""
    current = getattr(module, "np", None)
    if isinstance(current, Numpy2Shim):
        return
    if current is not np:
        raise TypeError(f"{module.__name__}.np is {current!r}, not numpy")
    module.np = Numpy2Shim()  # type: ignore[attr-defined]


@functools.cache
def noise_module() -> ModuleType:
    """The package's `env_wrapper`, shimmed once per process."""
    module = import_env_wrapper()
    install_numpy2_shim(module)
    return module


_DRAWING = threading.Lock()


@contextlib.contextmanager
def _draws_from(module: ModuleType, rng: np.random.RandomState | None) -> Iterator[None]:
    """While the package's noise runs, its `np.random` is `rng` (a `RandomState` has the
    module functions it calls); without one, NumPy's global state, as in the package."""
    if rng is None:
        yield
        return
    shim = module.np
    assert isinstance(shim, Numpy2Shim)
    with _DRAWING:
        vars(shim)["random"] = rng
        try:
            yield
        finally:
            vars(shim).pop("random")


def apply_noise(
    raw_image: npt.NDArray[np.uint8], level: int, rng: np.random.RandomState | None = None
) -> npt.NDArray[np.uint8]:
    """The agentview image as `ControlEnv.step` transforms it at noise `level` (1-10
    motion, 11-20 Gaussian, 21-30 zoom, 31-40 fog, 41-50 glass; 0 none).

    The package draws from NumPy's global random state, which every `env.seed` resets:
    with several live episodes in one process their draws would interleave. Given `rng`,
    the same functions draw from it instead, so an episode's noise is its own.
    """
    if type(level) is not int or not 0 <= level <= MAX_NOISE_LEVEL:
        raise ValueError(f"noise level {level!r} is not an integer in 0..{MAX_NOISE_LEVEL}")
    if level == 0:
        return raw_image
    if raw_image.dtype != np.uint8 or raw_image.ndim != 3 or raw_image.shape[2] != 3:
        raise ValueError(f"expected an HxWx3 uint8 image, got {raw_image.dtype} {raw_image.shape}")
    wrapper = noise_module()
    pil_image = PILImage.fromarray(raw_image)
    noisy: npt.NDArray[Any]
    with _draws_from(wrapper, rng):
        if level <= 10:
            noisy = wrapper.motion_blur(pil_image, severity=level)
        elif level <= 20:
            noisy = wrapper.gaussian_blur(pil_image, severity=level - 10).astype(np.uint8)
        elif level <= 30:
            noisy = wrapper.zoom_blur(pil_image, severity=level - 20).astype(np.uint8)
        elif level <= 40:
            noisy = wrapper.fog(pil_image, severity=level - 30).astype(np.uint8)
        else:
            noisy = wrapper.glass_blur(pil_image, severity=level - 40).astype(np.uint8)
    if noisy.dtype != np.uint8 or noisy.shape != raw_image.shape:
        raise SimulatorError(
            f"noise level {level} gave {noisy.dtype} {noisy.shape} for a {raw_image.shape} image"
        )
    return np.ascontiguousarray(noisy)
