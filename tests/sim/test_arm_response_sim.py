"""How the arm answers full-scale controls: the figures that the version-2 actor
instructions state (prompts/actor_instructions_v2.txt, ACTIONS), measured on the real
simulator.

Every figure is parsed from the instructions, so a figure edited without measuring
again fails here. The project's adapter drives each measurement as a run does, in one
task of every scene family, from a fresh episode's rest: each task's episode is started
once as a run starts it (seed, reset, released state 0, ten settling controls
[0, 0, 0, 0, 0, 0, -1]), parked at rest as a run parks its live episodes, and put back
at rest before each measurement (a reset costs far more than the controls measured).
The first measurement is taken on the fresh episode itself and again after a put-back:
the two must be equal, bit for bit, or every figure below would be measured from
somewhere else than a fresh episode's rest.

- translation: five full-scale controls along one axis (each sign): how far the
  end-effector site moved in all by the last of them; then zeros: how far it coasts
  from there, and for how many zero controls it still moves the stated step or more;
- rotation: five full-scale controls on [3], [4] or [5] (each sign): the angle of the
  hand's relative rotation (the end-effector site's frame, the frame the controller
  turns) by the last of them; then zeros: the further turn, the whole turn, for how
  many zero controls it still turns the stated step or more, and that it comes to rest
  at the controller's target;
- gripper, nothing between the fingers (robot0_gripper_qpos, as delivered): +1 from
  fully open, then -1 from fully closed, counted until both fingers are within 1.5 mm
  of where they end; three full-scale controls each way, then 0: how far the fingers
  go on, and that they then hold.

A figure "about A-B" holds when the measurement, rounded to the figure's decimals,
lies in [A, B]; "about A" stands for A-A.

Measured (seed 0, state 0; both signs; the five scene families of
test_world_frame_sim.py, all alike within a few percent):
- five full-scale translations: 4.39-4.69 cm in all along x, 5.43-5.46 along y,
  5.42-5.63 along z; then coasting 2.28-2.49 cm over 8-9 controls along x (it
  creeps back up the ~0.9 cm that the x move sank), 1.14-1.20 cm over 3 along y,
  0.90-1.21 cm over 2 along z (under 1 mm per control after that);
- five full-scale rotations: 0.447-0.450 rad (25.6-25.8 degrees) with [3] either
  sign; 0.254-0.263 rad with +[4], 0.207-0.216 with -[4]; 0.267-0.270 with [5]; then
  0.40 rad more with [3], 0.44-0.45 with [4] and [5] (9 to 12 controls at 0.01 rad or
  more), 0.85 rad in all with [3], 0.66-0.71 with [4] and [5];
- gripper: 12 controls to close, 12 to open; the fingers mirror each other within
  0.01 mm; 0 after three full-scale controls: each finger goes on 7.7-7.8 mm.
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt
import pytest
from mailroom.benchmarks.libero.adapter import LiberoAdapter, resolve_task
from mailroom.benchmarks.libero.parking import ParkedLibero
from mailroom.benchmarks.libero.specs import SETTLING_ACTION
from mailroom.orchestrator.sim.base import TaskIdentity

INSTRUCTIONS = Path(__file__).resolve().parents[2] / "prompts" / "actor_instructions_v2.txt"

# One task of every scene family (the BDDL problem class), as in test_world_frame_sim.py.
SCENES: tuple[tuple[str, int], ...] = (
    ("libero_spatial", 0),  # LIBERO_Tabletop_Manipulation
    ("libero_object", 0),  # LIBERO_Floor_Manipulation
    ("libero_10", 0),  # LIBERO_Living_Room_Tabletop_Manipulation
    ("libero_10", 2),  # LIBERO_Kitchen_Tabletop_Manipulation
    ("libero_10", 5),  # LIBERO_Study_Tabletop_Manipulation
)
SEED = 0
FULL_SCALE_CONTROLS = 5
TRANSLATION_ZEROS = 20  # the hand is at rest well before
ROTATION_ZEROS = 25
GRIPPER_CONTROLS = 20
GRIPPER_TOLERANCE = 0.0015  # m: a finger this close to where it ends is closed / open
PART_WAY_CONTROLS = 3
HOLD_ZEROS = 10
HELD = 1e-4  # m per control: a finger that moves less is held
TOGETHER = 1e-4  # m: the two fingers' openings differ by less

Vec = npt.NDArray[np.float64]

# --- the stated figures --------------------------------------------------------------

NUMBER = r"(\d+(?:\.\d+)?)"
FIGURE = rf"{NUMBER}(?:-{NUMBER})?"


@dataclass(frozen=True)
class Figure:
    """A stated figure, "about A-B" or "about A", with its precision."""

    low: float
    high: float
    decimals: int

    def holds(self, value: float) -> bool:
        half = 0.5 * 10.0**-self.decimals
        return self.low - half <= value < self.high + half

    def __str__(self) -> str:
        return f"{self.low}-{self.high}"


def _figure(low: str, high: str | None) -> Figure:
    decimals = max(len(part.partition(".")[2]) for part in (low, high or low))
    return Figure(float(low), float(high or low), decimals)


def actions_section() -> str:
    """The ACTIONS section of the version-2 instructions, its white space flattened."""
    text = INSTRUCTIONS.read_text(encoding="utf-8")
    found = re.search(r"^ACTIONS\n(.*?)\n\n", text, re.DOTALL | re.MULTILINE)
    assert found is not None, "no ACTIONS section"
    return " ".join(found.group(1).split())


def stated(sentence: str) -> list[Figure]:
    """The figures of `sentence` (each {} a figure) as the instructions state them."""
    parts = sentence.split("{}")
    pattern = FIGURE.join(re.escape(part) for part in parts)
    found = re.findall(pattern, actions_section())
    assert len(found) == 1, f"the instructions state no (or several) {sentence!r}"
    numbers = found[0]
    return [_figure(numbers[2 * i], numbers[2 * i + 1] or None) for i in range(len(parts) - 1)]


TRANSLATION = "five full-scale controls from rest moved it about {} cm in all."
TRANSLATION_COAST = (
    "Back at 0 after such a move, the hand coasted about {} cm further (the most along x)"
    " over {} controls before it moved less than {} mm per control."
)
ROTATION = (
    "but five full-scale controls from rest turned the hand about {} rad ({} degrees) by"
    " the last one: about {} rad with [3], {} rad with [4] or [5]."
)
ROTATION_COAST = (
    "Zeros in [3], [4], [5] keep the last rotation target, so the hand goes on turning:"
    " about {} rad more over {} controls (until it turned less than {} rad per control),"
    " about {} rad ({} degrees) in all."
)
GRIPPER = (
    "With nothing between the fingers, +1 closed it from fully open in about {} controls,"
    " and -1 opened it from fully closed in about {}; the two fingers move together."
)
PART_WAY = (
    "0 stops a closing or an opening part-way: after three full-scale controls, 0 let"
    " each finger go on about {} mm more, then held it."
)

# --- measuring ----------------------------------------------------------------------


@dataclass(frozen=True)
class Move:
    """Five full-scale controls on one input from rest, then zeros (m or rad)."""

    by_last: float  # by the last full-scale control, from rest
    further: float  # from there to where it rests
    in_all: float  # from rest to rest
    steps: tuple[float, ...]  # during each zero control
    along: float  # cosine between the motion (or rotation axis) and the commanded axis
    off_target: float  # rotation: rad between the rest and the controller's goal
    target_kept: bool  # rotation: the zeros left the controller's goal as it was


@dataclass(frozen=True)
class Gripper:
    """Finger openings (robot0_gripper_qpos) after each control."""

    settled: Vec  # (2,) after the settling controls: open
    closing: Vec  # (n, 2): +1 from there
    opening: Vec  # (n, 2): then -1
    part_way: dict[float, Vec]  # (k, 2) per direction: three controls that way, then 0


@dataclass(frozen=True)
class Scene:
    moves: dict[tuple[int, float], Move]  # (action index, sign), each from the put-back rest
    gripper: Gripper
    fresh: Move  # +[0] on the fresh episode itself, before anything was put back


def _angle(rotation: Vec) -> float:
    """The axis-angle magnitude of a rotation matrix, in radians."""
    return float(np.arccos(np.clip((np.trace(rotation) - 1.0) / 2.0, -1.0, 1.0)))


def _axis(rotation: Vec) -> Vec:
    axis = np.array(
        [
            rotation[2, 1] - rotation[1, 2],
            rotation[0, 2] - rotation[2, 0],
            rotation[1, 0] - rotation[0, 1],
        ]
    )
    return np.asarray(axis / np.linalg.norm(axis), dtype=np.float64)


class Episode:
    """One task's episode through the project's adapter, with the hand's pose read
    alongside: started fresh, then parked at rest (`at_rest`), to be put back there
    (`back`) before each measurement."""

    def __init__(self, adapter: LiberoAdapter, identity: TaskIdentity) -> None:
        self.adapter = adapter
        start = adapter.start_episode(identity, 0, SEED)
        assert start.capture.gripper_qpos is not None
        self.settled_gripper = np.array(start.capture.gripper_qpos, dtype=np.float64)
        # The adapter's env (a hard reset renews its simulator and robot: read them now;
        # putting an episode back keeps them).
        env: Any = adapter._env.env
        self.sim = env.sim
        self.robot = env.robots[0]
        # The rest pose is read here, once: after a put-back the simulator's derived
        # values (the site poses) are stale until the next control (parking.py).
        self.rest = self.pose()
        self.at_rest = adapter.park()

    def back(self, parked: ParkedLibero | None = None) -> Episode:
        """Put the episode back where it was parked (at rest, unless told)."""
        self.adapter.unpark(self.at_rest if parked is None else parked)
        return self

    def control(self, index: int | None = None, value: float = 0.0) -> Vec:
        """One control: the settling action with `action[index] = value`; the fingers."""
        action = list(SETTLING_ACTION)
        if index is not None:
            action[index] = value
        outcome = self.adapter.step(action, observe=False)
        assert outcome.state is not None
        return np.array(outcome.state[7:9], dtype=np.float64)

    def pose(self) -> tuple[Vec, Vec]:
        site = self.robot.eef_site_id
        position = np.array(self.sim.data.site_xpos[site], dtype=np.float64)
        frame = np.array(self.sim.data.site_xmat[site], dtype=np.float64).reshape(3, 3)
        return position, frame


def _translation(episode: Episode, index: int, sign: float) -> Move:
    start, _ = episode.rest
    for _ in range(FULL_SCALE_CONTROLS):
        episode.control(index, sign)
    last, _ = episode.pose()
    path = [last]
    for _ in range(TRANSLATION_ZEROS):
        episode.control()
        path.append(episode.pose()[0])
    moved = last - start
    return Move(
        by_last=float(np.linalg.norm(moved)),
        further=float(np.linalg.norm(path[-1] - last)),
        in_all=float(np.linalg.norm(path[-1] - start)),
        steps=tuple(float(np.linalg.norm(b - a)) for a, b in itertools.pairwise(path)),
        along=float(sign * moved[index] / np.linalg.norm(moved)),
        off_target=0.0,
        target_kept=True,
    )


def _rotation(episode: Episode, index: int, sign: float) -> Move:
    _, start = episode.rest
    for _ in range(FULL_SCALE_CONTROLS):
        episode.control(index, sign)
    _, last = episode.pose()
    target = np.array(episode.robot.controller.goal_ori, dtype=np.float64)
    frames = [last]
    for _ in range(ROTATION_ZEROS):
        episode.control()
        frames.append(episode.pose()[1])
    turned = last @ start.T
    goal = np.asarray(episode.robot.controller.goal_ori, dtype=np.float64)
    return Move(
        by_last=_angle(turned),
        further=_angle(frames[-1] @ last.T),
        in_all=_angle(frames[-1] @ start.T),
        steps=tuple(_angle(b @ a.T) for a, b in itertools.pairwise(frames)),
        along=float(sign * _axis(turned)[index - 3]),
        off_target=_angle(frames[-1] @ goal.T),
        target_kept=bool(np.array_equal(goal, target)),
    )


def _gripper(episode: Episode) -> Gripper:
    episode.back()
    closing = np.array([episode.control(6, 1.0) for _ in range(GRIPPER_CONTROLS)])
    closed = episode.adapter.park()  # fully closed, from rest
    opening = np.array([episode.control(6, -1.0) for _ in range(GRIPPER_CONTROLS)])
    part_way: dict[float, Vec] = {}
    for sign, start in ((1.0, episode.at_rest), (-1.0, closed)):  # -1 from fully closed
        episode.back(start)
        fingers = [episode.control(6, sign) for _ in range(PART_WAY_CONTROLS)]
        fingers += [episode.control(6, 0.0) for _ in range(HOLD_ZEROS)]
        part_way[sign] = np.array(fingers)
    return Gripper(episode.settled_gripper, closing, opening, part_way)


def measure(adapter: LiberoAdapter, suite: str, task_index: int) -> Scene:
    episode = Episode(adapter, resolve_task(suite, task_index))
    fresh = _translation(episode, 0, 1.0)
    moves: dict[tuple[int, float], Move] = {}
    for index in range(6):
        for sign in (1.0, -1.0):
            measured = _translation if index < 3 else _rotation
            moves[(index, sign)] = measured(episode.back(), index, sign)
    return Scene(moves, _gripper(episode), fresh)


@pytest.fixture(scope="module")
def scenes() -> Iterator[dict[str, Scene]]:
    adapter = LiberoAdapter(control_cap=100, proprio=True)
    try:
        yield {f"{suite} {index}": measure(adapter, suite, index) for suite, index in SCENES}
    finally:
        adapter.close()


def _moves(
    scenes: dict[str, Scene], indices: tuple[int, ...]
) -> Iterator[tuple[str, int, float, Move]]:
    for name, scene in scenes.items():
        for (index, sign), move in scene.moves.items():
            if index in indices:
                yield name, index, sign, move


def _controls_until_below(steps: tuple[float, ...], threshold: float) -> int:
    """Zero controls that still moved the hand `threshold` or more, up to the first that did not."""
    for count, step in enumerate(steps):
        if step < threshold:
            return count
    raise AssertionError(f"still moving {steps[-1]} per control after {len(steps)} controls")


def _controls_until_within(fingers: Vec, end: Vec) -> int:
    """Controls until both fingers are within the tolerance of `end`, and stay there."""
    far = np.flatnonzero(np.any(np.abs(fingers - end) > GRIPPER_TOLERANCE, axis=1))
    assert far.size and far[-1] < len(fingers) - 1, fingers
    return int(far[-1]) + 2  # the control after the last one that left it farther


# --- the checks -----------------------------------------------------------------------


def test_each_measurement_starts_from_a_fresh_episodes_rest(scenes: dict[str, Scene]) -> None:
    """The same controls from the put-back rest move the hand exactly as from the fresh
    episode's own rest: the put-back episode is the fresh one, at rest."""
    for name, scene in scenes.items():
        assert scene.moves[(0, 1.0)] == scene.fresh, name


def test_translation(scenes: dict[str, Scene]) -> None:
    (moved,) = stated(TRANSLATION)
    coast, controls, step = stated(TRANSLATION_COAST)
    for name, index, sign, move in _moves(scenes, (0, 1, 2)):
        where = (name, index, sign, move)
        assert move.along > 0.95, where  # mostly along the commanded axis
        assert moved.holds(100 * move.by_last), (moved, where)
        assert coast.holds(100 * move.further), (coast, where)
        assert controls.holds(_controls_until_below(move.steps, step.low / 1000)), (controls, where)
    for name, scene in scenes.items():
        for sign in (1.0, -1.0):  # "the most along x"
            further = [scene.moves[(index, sign)].further for index in range(3)]
            assert int(np.argmax(further)) == 0, (name, sign, further)


def test_rotation(scenes: dict[str, Scene]) -> None:
    by_last, degrees, roll, pitch_yaw = stated(ROTATION)
    further, controls, step, in_all, in_all_degrees = stated(ROTATION_COAST)
    for name, index, sign, move in _moves(scenes, (3, 4, 5)):
        where = (name, index, sign, move)
        assert move.along > 0.95, where  # about the commanded world axis
        assert by_last.holds(move.by_last), (by_last, where)
        assert degrees.holds(np.degrees(move.by_last)), (degrees, where)
        assert (roll if index == 3 else pitch_yaw).holds(move.by_last), where
        assert further.holds(move.further), (further, where)
        assert controls.holds(_controls_until_below(move.steps, step.low)), (controls, where)
        assert in_all.holds(move.in_all), (in_all, where)
        assert in_all_degrees.holds(np.degrees(move.in_all)), (in_all_degrees, where)
        # The zeros kept the last full-scale control's target, and the hand reached it.
        assert move.target_kept, where
        assert move.off_target < 0.02, where


def test_gripper_closing_and_opening(scenes: dict[str, Scene]) -> None:
    closing, opening = stated(GRIPPER)
    for name, scene in scenes.items():
        grip = scene.gripper
        open_end, closed_end = grip.opening[-1], grip.closing[-1]
        assert np.all(np.abs(open_end) - np.abs(closed_end) > 0.03), (name, grip)
        # Settled, the gripper is fully open (as far as the opening ends).
        assert np.all(np.abs(grip.settled - open_end) <= GRIPPER_TOLERANCE), (name, grip)
        assert closing.holds(_controls_until_within(grip.closing, closed_end)), (name, grip)
        assert opening.holds(_controls_until_within(grip.opening, open_end)), (name, grip)
        # The two fingers move together: robot0_gripper_qpos is (+opening, -opening).
        for fingers in (grip.closing, grip.opening, *grip.part_way.values()):
            assert np.all(np.abs(fingers[:, 0] + fingers[:, 1]) < TOGETHER), (name, fingers)


def test_zero_holds_the_gripper_part_way(scenes: dict[str, Scene]) -> None:
    (further,) = stated(PART_WAY)
    for name, scene in scenes.items():
        grip = scene.gripper
        # Each finger's opening (its qpos is signed).
        open_end, closed_end = np.abs(grip.opening[-1]), np.abs(grip.closing[-1])
        for sign, fingers in grip.part_way.items():
            where = (name, sign, fingers)
            openings = np.abs(fingers)
            last_full_scale, rest = openings[PART_WAY_CONTROLS - 1], openings[-1]
            went_on = sign * (last_full_scale - rest)  # closing (+1) narrows the opening
            assert all(further.holds(1000 * float(x)) for x in went_on), (further, where)
            assert np.all(np.abs(openings[-1] - openings[-2]) < HELD), where  # held
            assert np.all(rest - closed_end > 0.005), where  # part-way: neither end
            assert np.all(open_end - rest > 0.005), where
