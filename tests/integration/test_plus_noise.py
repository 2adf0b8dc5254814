"""LIBERO-Plus sensor noise: the package's own functions, run under NumPy 2 through a shim
that changes nothing but the two names NumPy 2 removed. No simulator is built."""

from __future__ import annotations

import os
import sys
from collections.abc import Callable
from pathlib import Path
from types import ModuleType
from typing import Any

import numpy as np
import numpy.typing as npt
import pytest
from mailroom.benchmarks.libero_plus import noise as plus_noise
from mailroom.benchmarks.libero_plus.noise import (
    Numpy2Shim,
    apply_noise,
    install_numpy2_shim,
    noise_module,
)
from PIL import Image as PILImage

CONFIG_PATH_BEFORE = os.environ.get("LIBERO_CONFIG_PATH")
FAMILY_REPRESENTATIVES = [1, 10, 11, 20, 21, 30, 31, 40, 41]
# Levels whose functions already run under NumPy 2: the shim must not change them.
NATIVE_LEVELS = [11, 15, 20, 21, 25, 30, 41, 50]


def scene() -> npt.NDArray[np.uint8]:
    """A 256x256 frame with gradients, edges and flat shapes for every blur to act on."""
    yy, xx = np.mgrid[0:256, 0:256]
    image = np.stack([xx, yy, (xx + yy) // 2], axis=-1).astype(np.uint8)
    image[40:110, 50:120] = (230, 30, 30)
    image[150:210, 90:230] = (20, 40, 220)
    image[(yy - 180) ** 2 + (xx - 60) ** 2 < 30**2] = (250, 250, 250)
    return image


@pytest.fixture(scope="module")
def wrapper() -> ModuleType:
    return noise_module()


def seeded(seed: int, function: Callable[[], npt.NDArray[Any]]) -> npt.NDArray[Any]:
    np.random.seed(seed)
    return function()


# --- the shim -------------------------------------------------------------------------


def test_fromstring_binary_mode_is_a_writable_frombuffer_copy() -> None:
    shim = Numpy2Shim()
    blob = bytes(range(256)) * 3
    for dtype, count in [(np.uint8, -1), (np.uint8, 10), (np.float64, 8), (np.int32, -1)]:
        read = shim.fromstring(blob, dtype, count)
        assert np.array_equal(read, np.frombuffer(blob, dtype=dtype, count=count))
        assert read.dtype == np.dtype(dtype) and read.flags.writeable and read.flags.owndata
    assert shim.fromstring(blob).dtype == np.float64  # NumPy 1.x's default dtype


def test_fromstring_text_mode_is_numpys() -> None:
    shim = Numpy2Shim()
    read = shim.fromstring("1 2 3", dtype=np.int64, sep=" ")
    assert np.array_equal(read, np.fromstring("1 2 3", dtype=np.int64, sep=" "))


def test_shim_passes_every_other_name_through() -> None:
    shim = Numpy2Shim()
    assert shim.float_ is np.float64
    assert shim.zeros is np.zeros and shim.random is np.random and shim.uint8 is np.uint8
    assert shim.newaxis is np.newaxis and shim.frombuffer is np.frombuffer
    with pytest.raises(AttributeError):
        _ = shim.no_such_numpy_name
    assert {"zeros", "float_", "fromstring"} <= set(dir(shim))


def test_install_is_idempotent_and_checks_what_it_replaces() -> None:
    module = ModuleType("fake_numpy1_code")
    module.np = np  # type: ignore[attr-defined]
    install_numpy2_shim(module)
    shim = module.np
    assert isinstance(shim, Numpy2Shim)
    install_numpy2_shim(module)
    assert module.np is shim
    stranger = ModuleType("other")
    stranger.np = object()  # type: ignore[attr-defined]
    with pytest.raises(TypeError, match="not numpy"):
        install_numpy2_shim(stranger)


def test_noise_module_is_the_packages_shimmed_once(wrapper: ModuleType) -> None:
    assert wrapper.__name__ == "liberoplus.liberoplus.envs.env_wrapper"
    assert isinstance(wrapper.np, Numpy2Shim)
    assert noise_module() is wrapper and wrapper.np is noise_module().np


def test_the_shim_is_needed(wrapper: ModuleType, monkeypatch: pytest.MonkeyPatch) -> None:
    """With the module's real numpy back, the package's motion blur and fog fail."""
    monkeypatch.setattr(wrapper, "np", np)
    image = PILImage.fromarray(scene())
    with pytest.raises(ValueError, match="binary mode of fromstring is removed"):
        wrapper.motion_blur(image, severity=1)
    with pytest.raises(AttributeError, match=r"np\.float_"):
        wrapper.fog(image, severity=1)
    monkeypatch.undo()
    assert isinstance(wrapper.np, Numpy2Shim)
    assert wrapper.motion_blur(image, severity=1).shape == (256, 256, 3)


# --- the noise ------------------------------------------------------------------------


def _direct(wrapper: ModuleType, image: npt.NDArray[np.uint8], level: int) -> npt.NDArray[Any]:
    """What `ControlEnv.step` computes for a native family, called on the package."""
    pil_image = PILImage.fromarray(image)
    family, severity = divmod(level - 1, 10)
    function = {1: wrapper.gaussian_blur, 2: wrapper.zoom_blur, 4: wrapper.glass_blur}[family]
    result: npt.NDArray[Any] = function(pil_image, severity=severity + 1).astype(np.uint8)
    return result


@pytest.mark.parametrize("level", NATIVE_LEVELS)
def test_native_families_equal_the_package_without_shim(
    wrapper: ModuleType, monkeypatch: pytest.MonkeyPatch, level: int
) -> None:
    image = scene()
    shimmed = seeded(7, lambda: apply_noise(image, level))
    monkeypatch.setattr(wrapper, "np", np)
    plain = seeded(7, lambda: _direct(wrapper, image, level))
    assert np.array_equal(shimmed, plain)


@pytest.mark.parametrize("level", FAMILY_REPRESENTATIVES)
def test_every_family_transforms_deterministically(level: int) -> None:
    image = scene()
    original = image.copy()
    first = seeded(3, lambda: apply_noise(image, level))
    again = seeded(3, lambda: apply_noise(image, level))
    assert first.shape == image.shape and first.dtype == np.uint8
    assert first.flags.c_contiguous
    assert not np.array_equal(first, image)
    assert np.array_equal(first, again)
    assert np.array_equal(image, original)  # the input is left as it was


@pytest.mark.parametrize("level", [1, 31])
def test_draws_come_from_numpys_global_random_state(level: int) -> None:
    """Motion blur's angle and fog's fractal change with the global seed."""
    image = scene()
    assert not np.array_equal(
        seeded(0, lambda: apply_noise(image, level)), seeded(1, lambda: apply_noise(image, level))
    )


@pytest.mark.parametrize("level", [1, 31, 41])
def test_an_episodes_own_draws_are_the_global_draws_of_the_same_seed(level: int) -> None:
    """Given a `RandomState`, the package's functions draw from it exactly as they would
    from the global state seeded the same, and leave the global state alone: another
    episode reseeding it (its `env.seed`) cannot change this episode's noise."""
    image = scene()
    expected = seeded(5, lambda: apply_noise(image, level))
    untouched = np.random.RandomState(123).random_sample()
    np.random.seed(123)
    own = apply_noise(image, level, np.random.RandomState(5))
    assert np.random.random_sample() == untouched  # the global state was not drawn from
    assert np.array_equal(own, expected)
    np.random.seed(999)  # what a concurrent episode's env.seed does meanwhile
    draws = np.random.RandomState(5)
    first = apply_noise(image, level, draws)
    np.random.seed(0)
    second = apply_noise(image, level, draws)
    assert np.array_equal(first, expected)
    assert not np.array_equal(second, first)  # the next frame's draws come next


def test_motion_blur_output_as_the_package_returns_it(wrapper: ModuleType) -> None:
    """The package's motion blur returns a channel-reordered view (not contiguous);
    `apply_noise` hands back a contiguous copy of the same pixels."""
    image = scene()
    raw = seeded(5, lambda: wrapper.motion_blur(PILImage.fromarray(image), severity=4))
    assert raw.shape == (256, 256, 3) and raw.dtype == np.uint8
    assert not raw.flags.c_contiguous
    delivered = seeded(5, lambda: apply_noise(image, 4))
    assert delivered.flags.c_contiguous and np.array_equal(delivered, raw)


def test_level_zero_is_the_identity() -> None:
    image = scene()
    assert apply_noise(image, 0) is image


@pytest.mark.parametrize("level", [-1, 51, 100, True, 1.0, "3"])
def test_bad_levels_are_refused(level: Any) -> None:
    with pytest.raises(ValueError, match="noise level"):
        apply_noise(scene(), level)


def test_bad_images_are_refused() -> None:
    with pytest.raises(ValueError, match="HxWx3 uint8"):
        apply_noise(scene().astype(np.float32), 11)
    with pytest.raises(ValueError, match="HxWx3 uint8"):
        apply_noise(scene()[..., 0], 11)


# --- importing the package ------------------------------------------------------------


def test_import_leaves_libero_paths_alone(wrapper: ModuleType) -> None:
    """LIBERO-Plus's configuration lives in the environment and reached it only during the
    import: LIBERO (libero-pro) still resolves its own files."""
    import libero.libero as libero_pro
    import liberoplus.liberoplus as plus

    expected = CONFIG_PATH_BEFORE or str(Path(sys.prefix) / "liberoplus-config")
    assert Path(plus.config_file).parent == Path(expected)
    assert os.environ.get("LIBERO_CONFIG_PATH") == CONFIG_PATH_BEFORE
    bddl_files = Path(libero_pro.get_libero_path("bddl_files")).resolve()
    assert bddl_files.is_relative_to(Path(libero_pro.__file__).resolve().parent)
    assert plus_noise.MAX_NOISE_LEVEL == 50
