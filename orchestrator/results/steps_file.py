"""An attempt's `steps.jsonl` as the runner writes it (one line per executed control: its
action, the native scorer's verdict after it and, with the proprio track, the state the
control ended in), and the state each control started from.

The runner records the state a control *ended* in on its line; a dataset's frame holds
the observation its action was chosen from, the state *before* the action (LeRobot's
convention). `states_before` shifts one to the other: the first control starts from the
state the first observation delivered (`start_state`), each later one from where the
previous control ended.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

# The proprioception track's components, as mailbox protocol v1 fixes them.
STATE_LAYOUT: tuple[str, ...] = (
    *(f"joint_{i}" for i in range(7)),
    "gripper_finger_left",
    "gripper_finger_right",
)
STATE_DIM = len(STATE_LAYOUT)


class StepsFileError(ValueError):
    """A steps.jsonl that does not hold what the runner promises; the file is skipped."""


@dataclass(frozen=True)
class StepRows:
    """One episode's steps as arrays, in control order."""

    frame_index: npt.NDArray[np.int64]
    policy_call: npt.NDArray[np.int64]
    action: npt.NDArray[np.float32]
    success: npt.NDArray[np.bool_]
    state: npt.NDArray[np.float32] | None

    def __len__(self) -> int:
        return len(self.frame_index)


def _no_constants(name: str) -> Any:
    raise ValueError(f"{name} is not a finite number")


def _vector(value: object, size: int, what: str) -> list[float]:
    if not isinstance(value, list) or len(value) != size:
        raise StepsFileError(f"{what} must be a list of {size} numbers")
    out: list[float] = []
    for item in value:
        if isinstance(item, bool) or not isinstance(item, int | float) or not math.isfinite(item):
            raise StepsFileError(f"{what} must hold finite numbers only")
        out.append(float(item))
    return out


def _int(value: object, minimum: int, what: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise StepsFileError(f"{what} must be an integer >= {minimum}")
    return value


def _lines(data: bytes) -> list[bytes]:
    """Complete lines; a torn last line (no newline: the writer stopped mid-line) is dropped."""
    lines = data.split(b"\n")
    lines.pop()  # after the final newline, or the torn remainder
    return lines


def read_steps(path: Path, *, proprio: bool, dimension: int) -> StepRows:
    """Parse one attempt's steps.jsonl as the runner writes it, one line per control, each
    action `dimension` numbers (its family's `ActionSpec`)."""
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise StepsFileError(f"unreadable: {exc.strerror or exc}") from exc
    frame_index: list[int] = []
    policy_call: list[int] = []
    actions: list[list[float]] = []
    success: list[bool] = []
    states: list[list[float]] = []
    for number, line in enumerate(_lines(data), start=1):
        where = f"line {number}"
        try:
            record = json.loads(line, parse_constant=_no_constants)
        except ValueError as exc:
            raise StepsFileError(f"{where}: not JSON: {exc}") from exc
        if not isinstance(record, dict):
            raise StepsFileError(f"{where}: not a JSON object")
        index = _int(record.get("frame_index"), 0, f"{where}: frame_index")
        if index != len(frame_index):
            raise StepsFileError(f"{where}: frame_index {index}, expected {len(frame_index)}")
        call = _int(record.get("policy_call"), 1, f"{where}: policy_call")
        if policy_call and call < policy_call[-1]:
            raise StepsFileError(f"{where}: policy_call went back from {policy_call[-1]}")
        done = record.get("native_success")
        if not isinstance(done, bool):
            raise StepsFileError(f"{where}: native_success must be true or false")
        frame_index.append(index)
        policy_call.append(call)
        actions.append(_vector(record.get("action"), dimension, f"{where}: action"))
        success.append(done)
        if proprio:
            states.append(_vector(record.get("state"), STATE_DIM, f"{where}: state"))
        elif "state" in record:
            raise StepsFileError(f"{where}: holds a state, but the run's proprio track was off")
    return StepRows(
        frame_index=np.asarray(frame_index, dtype=np.int64),
        policy_call=np.asarray(policy_call, dtype=np.int64),
        action=np.asarray(actions, dtype=np.float32).reshape(-1, dimension),
        success=np.asarray(success, dtype=np.bool_),
        state=np.asarray(states, dtype=np.float32).reshape(-1, STATE_DIM) if proprio else None,
    )


def start_state(observation: Path) -> npt.NDArray[np.float32]:
    """The state the first control started from: the proprioception the attempt's first
    observation delivered (`observations/obs-1.json`, kept by every record), in
    `STATE_LAYOUT`'s order; raises StepsFileError when it is missing or malformed."""
    try:
        data = observation.read_bytes()
    except OSError as exc:
        raise StepsFileError(f"its first observation is unreadable: {exc.strerror or exc}") from exc
    try:
        document = json.loads(data, parse_constant=_no_constants)
    except ValueError as exc:
        raise StepsFileError(f"its first observation is not JSON: {exc}") from exc
    proprio = document.get("proprio") if isinstance(document, dict) else None
    if not isinstance(proprio, dict):
        raise StepsFileError("its first observation delivered no proprioception")
    joints = _vector(proprio.get("joint_pos"), 7, "the first observation's joint_pos")
    fingers = _vector(proprio.get("gripper_qpos"), 2, "the first observation's gripper_qpos")
    return np.asarray([*joints, *fingers], dtype=np.float32)


def states_before(
    start: npt.NDArray[np.float32], ended: npt.NDArray[np.float32]
) -> npt.NDArray[np.float32]:
    """Each control's state before it was applied: `start` for the first, then the state
    each control ended in for the one after it (the last control's end is no frame's)."""
    if len(ended) == 0:
        return ended
    return np.concatenate([start.reshape(1, -1), ended[:-1]]).astype(np.float32)
