"""Re-execute a recorded attempt and compare it with its record, field by field.

The scene is rebuilt from the recorded case (its BDDL and init-state file hashes and
the selected state's hash are checked first), seeded, reset, given the released state
and settled exactly as the runner does (`Simulator.start_episode`); then each recorded
executed prefix runs in order. At every delivered observation the PNG hashes of both
cameras are compared (encoded as the mailbox encodes them); at the end the executed
controls, the first success's control and policy call and the native outcome.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from mailroom.hashing import sha256_bytes
from mailroom.orchestrator.records.result import EpisodeResult
from mailroom.orchestrator.replay.diagnostics import GoalTracker
from mailroom.orchestrator.replay.recorded import RecordedAttempt
from mailroom.orchestrator.sim.base import Capture, EpisodeStart, GoalProbe, Simulator
from mailroom.orchestrator.transport.png import encode_png
from pydantic import BaseModel, ConfigDict

VerdictKind = Literal["reproduced", "diverged", "not_replayable"]


class ReplayVerdict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    attempt_id: str
    verdict: VerdictKind
    # Where it diverged: the field, at which executed control it showed (0: before any)
    # and which observation, with what the record says and what the replay found; and
    # the last control at which replay and record still agreed (the change lies after
    # it: between two observations only the images at their ends are on record).
    field: str | None = None
    control: int | None = None
    agreed_until_control: int | None = None
    observation: int | None = None
    recorded: str | None = None
    replayed: str | None = None
    reason: str | None = None
    checked_observations: int = 0
    executed_controls: int = 0
    # The attempt's goal-predicate diagnostics: "written", or why not (None: none made).
    diagnostics: str | None = None


@dataclass(frozen=True)
class _At:
    """Where a divergence showed: after `control` executed controls, at `observation`,
    replay and record having last agreed after `agreed` controls."""

    control: int
    observation: int
    agreed: int = 0


# A scene that is not the recorded one diverges before any control or observation.
_BEFORE_ANY = _At(control=0, observation=0)


class _Diverged(Exception):
    def __init__(self, field: str, recorded: object, replayed: object, at: _At) -> None:
        super().__init__(field)
        self.field, self.recorded, self.replayed, self.at = field, recorded, replayed, at


def _hashes(capture: Capture) -> dict[str, str]:
    return {camera: sha256_bytes(encode_png(image)) for camera, image in capture.images.items()}


def replay(
    adapter: Simulator, recorded: RecordedAttempt, goals: GoalTracker | None = None
) -> ReplayVerdict:
    """`goals`, with a simulator that is a `GoalProbe`, hears the goal predicates after
    settling and after every control (diagnostics)."""
    try:
        checked, executed = _replay(adapter, recorded, goals)
    except _Diverged as found:
        return ReplayVerdict(
            attempt_id=recorded.attempt_id,
            verdict="diverged",
            field=found.field,
            control=found.at.control,
            agreed_until_control=found.at.agreed,
            observation=found.at.observation,
            recorded=str(found.recorded),
            replayed=str(found.replayed),
        )
    return ReplayVerdict(
        attempt_id=recorded.attempt_id,
        verdict="reproduced",
        checked_observations=checked,
        executed_controls=executed,
    )


def _replay(
    adapter: Simulator, recorded: RecordedAttempt, goals: GoalTracker | None
) -> tuple[int, int]:
    """Replay the recorded decisions in order, checking every recorded observation on the
    way and the outcome at the end: the observations checked and the controls executed."""

    def note_goals(control: int) -> None:
        if goals is not None and isinstance(adapter, GoalProbe):
            goals.observe(control, adapter.goal_predicates())

    result = recorded.result
    capture: Capture | None = _rebuild_scene(adapter, result).capture
    executed = 0
    note_goals(0)
    first_success: tuple[int, int] | None = None
    by_sequence = {d.sequence: d for d in recorded.decisions}
    checked = 0
    agreed = 0  # the controls executed when replay and record last agreed
    last = max(recorded.observations)
    for sequence in range(1, last + 1):
        want = recorded.observations.get(sequence)
        if want is not None:
            _compare_observation(want, capture, _At(executed, sequence, agreed))
            checked += 1
            agreed = executed
        decision = by_sequence.get(sequence)
        if decision is None:
            continue  # rejected or a stop: the same scene again, nothing executed
        observe_next = (sequence + 1) in recorded.observations
        for i, action in enumerate(decision.executed_prefix):
            outcome = adapter.step(
                action, observe=observe_next and i == len(decision.executed_prefix) - 1
            )
            executed += 1
            note_goals(executed)
            if outcome.success and first_success is None:
                first_success = (executed, sequence)
            capture = outcome.capture
    _compare_outcome(result, executed, first_success, _At(executed, last, agreed))
    return checked, executed


def _rebuild_scene(adapter: Simulator, result: EpisodeResult) -> EpisodeStart:
    """The recorded case's scene, started and settled as the runner did: its files, task
    and instruction, its installed state and its settling checked against the record."""
    case = result.case
    identity = adapter.resolve_task(case.suite, case.task_index, case.task_order_index)
    for name, recorded_hash, found_hash in (
        ("bddl_sha256", case.bddl_sha256, identity.bddl_sha256),
        ("init_states_sha256", case.init_states_sha256, identity.init_states_sha256),
        # The same files can carry another instruction (a LIBERO-Para paraphrase).
        ("task_name", case.task_name, identity.task_name),
        ("instruction", case.instruction, identity.instruction),
    ):
        if recorded_hash != found_hash:
            raise _Diverged(name, recorded_hash, found_hash, _BEFORE_ANY)
    adapter.set_control_cap(result.settings.control_cap)
    start = adapter.start_episode(identity, case.init_state_index, case.seed)
    if start.state_sha256 != case.state_sha256:
        raise _Diverged("state_sha256", case.state_sha256, start.state_sha256, _BEFORE_ANY)
    if start.settling_controls != result.counters.settling_controls:
        raise _Diverged(
            "settling_controls",
            result.counters.settling_controls,
            start.settling_controls,
            _BEFORE_ANY,
        )
    return start


def _compare_observation(want: dict[str, str], capture: Capture | None, at: _At) -> None:
    """A recorded observation against the replay's: each camera's PNG hash, as the
    mailbox encodes it."""
    if capture is None:
        raise _Diverged("observation", "published", "no capture", at)
    got = _hashes(capture)
    for camera in sorted(want):
        if got.get(camera) != want[camera]:
            raise _Diverged(f"image_sha256.{camera}", want[camera], got.get(camera), at)


def _compare_outcome(
    result: EpisodeResult, executed: int, first_success: tuple[int, int] | None, at: _At
) -> None:
    """The replay's end against the record's: the controls executed, the first success's
    control and policy call, and the native outcome."""
    counters = result.counters
    recorded_success = (
        None
        if counters.first_success_control is None
        else (counters.first_success_control, counters.first_success_policy_call)
    )
    # Each observation is answered by one policy call: call n answers observation n.
    if executed != counters.executed_controls:
        raise _Diverged("executed_controls", counters.executed_controls, executed, at)
    if first_success != recorded_success:
        raise _Diverged("first_success", recorded_success, first_success, at)
    native = "success" if first_success is not None else "no success"
    recorded_native = "success" if result.termination == "native_success" else "no success"
    if native != recorded_native:
        raise _Diverged("native_outcome", recorded_native, native, at)
