"""Runs one episode's control loop: budgets, counters, stop, invalid-action feedback, endings.

Counters are counted where things happen, never inferred. The outcome is the native
scorer's alone: `success` only on native success, `error` only for typed errors.
"""

from __future__ import annotations

import secrets
import time
from collections.abc import Generator, Mapping
from dataclasses import dataclass, field
from typing import Literal, Protocol

from mailroom.mailbox.feedback import bounded_feedback
from mailroom.mailbox.held_directories import EndpointTamperedError
from mailroom.mailbox.messages import Feedback, PublicCounters
from mailroom.mailbox.parser import Accepted, ActionLimits, Invalid, Issue, ProtocolError
from mailroom.measures import CLOCK
from mailroom.orchestrator.episode.collector_freeze import settle_heap, thaw_heap
from mailroom.orchestrator.episode.evidence import EpisodeEvidence
from mailroom.orchestrator.episode.settings import RunSettings
from mailroom.orchestrator.families.registry import family, family_protocol
from mailroom.orchestrator.packages.errors import PackageError
from mailroom.orchestrator.records.confinement import ConfinementRecord
from mailroom.orchestrator.records.result import (
    CaseRecord,
    Counters,
    Enforcement,
    EpisodeResult,
    Latency,
    Outcome,
    SettingsRecord,
    Termination,
    Truncation,
    TypedError,
    Usage,
)
from mailroom.orchestrator.sim.base import (
    Capture,
    EpisodeStart,
    Image,
    Simulator,
    SimulatorError,
    TaskIdentity,
    simulator_holding,
)
from mailroom.orchestrator.transport.base import (
    DecisionOutcome,
    Delivery,
    InfrastructureFailed,
    PolicyFailed,
    TimedOut,
    Transport,
)
from mailroom.orchestrator.transport.published_action import (
    PublishedActionSpec,
    published_action,
)
from mailroom.timestamps import utc_timestamp


@dataclass(frozen=True)
class _Served:
    """A judged response: its actor latency, how long it waited to be served, and when
    serving began (monotonic), until the next observation or the episode's end."""

    sequence: int
    latency_s: float
    queue_delay_s: float
    served_at: float


def _record_timing(evidence: EpisodeEvidence, state: _State, processing_s: float | None) -> None:
    served = state.served
    assert served is not None
    state.served = None
    # Deferred: written once the next observation is out, off the decision path.
    evidence.defer_event(
        "decision_served",
        sequence=served.sequence,
        latency_ms=round(served.latency_s * 1000.0, 3),
        queue_delay_ms=round(served.queue_delay_s * 1000.0, 3),
        processing_ms=None if processing_s is None else round(processing_s * 1000.0, 3),
    )


@dataclass
class _State:
    counters: Counters
    latencies_ms: list[float] = field(default_factory=list)
    queue_delays_ms: list[float] = field(default_factory=list)
    processing_ms: list[float] = field(default_factory=list)
    errors: list[TypedError] = field(default_factory=list)
    termination: Termination | None = None
    truncation: Truncation | None = None
    served: _Served | None = None


_TypedEnding = Literal["policy_error", "protocol_error", "actor_timeout", "infrastructure_error"]


def _end_with_error(
    state: _State, kind: _TypedEnding, code: str, message: str, policy_call: int | None
) -> None:
    """End the episode with a typed error; its termination is named as the error's kind."""
    state.termination = kind
    state.errors.append(TypedError(kind=kind, code=code, message=message, policy_call=policy_call))


@dataclass(frozen=True)
class _Terms:
    """What every observation of an episode shares: its task's instruction, the budgets
    (the control cap published as `public_cap` only where it tells nothing), the action
    limits and the action spec."""

    instruction: str
    control_cap: int
    public_cap: int | None
    max_policy_calls: int | None
    limits: ActionLimits
    spec: PublishedActionSpec


def _budget_spent(terms: _Terms, c: Counters, wall_left: float | None) -> Truncation | None:
    """The budget that ends the episode before another observation, if one does."""
    if terms.max_policy_calls is not None and c.policy_calls >= terms.max_policy_calls:
        return "policy_call_cap"
    if c.executed_controls >= terms.control_cap:
        return "control_cap"
    if wall_left is not None and wall_left <= 0:
        return "wall_time"
    return None


def _observation(
    terms: _Terms, sequence: int, capture: Capture, c: Counters, feedback: Feedback | None
) -> Delivery:
    """The next observation for the actor: the capture, the public counters, feedback."""
    return Delivery(
        sequence=sequence,
        request_id=secrets.token_hex(16),
        instruction=terms.instruction,
        capture=capture,
        action_spec=terms.spec,
        # The runner's own counts, of the right types by construction: built
        # without pydantic's validation, which costs ~1 ms on this path cold.
        counters=PublicCounters.model_construct(
            policy_calls=c.policy_calls,
            max_policy_calls=terms.max_policy_calls,
            executed_controls=c.executed_controls,
            max_controls=terms.public_cap,
            rejected_responses=c.rejected_responses,
        ),
        feedback=feedback,
    )


def _publish(
    delivery: Delivery, transport: Transport, evidence: EpisodeEvidence, state: _State
) -> float:
    """Hand the observation to the actor and return when (monotonic); the previous
    decision's serving time and the last chunk's rows are written while the actor works."""
    transport.deliver(delivery)
    CLOCK.end_cycle()
    published = time.monotonic()
    if state.served is not None:
        processing_s = published - state.served.served_at
        state.processing_ms.append(processing_s * 1000.0)
        _record_timing(evidence, state, processing_s)
    with CLOCK.phase("after_publication"):
        evidence.write_steps()  # the last chunk's rows, while the actor works
    return published


def _count_judged(transport: Transport, state: _State, sequence: int, published: float) -> None:
    """Count a judged response (accepted or rejected) as a policy call, with its latency
    from publication and its queue delay; its serving time follows with the next
    observation."""
    state.counters.policy_calls += 1
    arrival = transport.arrival()
    latency_s = max(0.0, arrival.arrived_at - published)
    state.latencies_ms.append(latency_s * 1000.0)
    state.queue_delays_ms.append(arrival.queue_delay_s * 1000.0)
    state.served = _Served(sequence, latency_s, arrival.queue_delay_s, arrival.served_at)


@dataclass(frozen=True)
class EpisodeRequest:
    attempt_id: str
    case_id: str
    identity: TaskIdentity
    init_state_index: int
    seed: int
    reference_horizon: int
    # How the actor answering this episode was confined (an in-process policy: `none`).
    confinement: ConfinementRecord
    # The actor instructions version it was handed ("v1", "v2", ...), as its result says.
    instructions_version: str
    # Whether the kernel enforced its actor's limits, from the actor's description once it
    # started (`Enforcement.of_actor`); not enforced, sampled for an actor not started here.
    enforcement: Enforcement = field(default_factory=lambda: Enforcement.of_actor(None))


def settings_record(
    settings: RunSettings, control_cap: int, settling_controls: int
) -> SettingsRecord:
    """The limits an episode ran under, as its result document discloses them
    (`settling_controls`: its family's, `ObservationSpec`)."""
    return SettingsRecord(
        budget_mode=settings.budget_mode,
        max_policy_calls=settings.max_policy_calls,
        replan_interval=settings.replan_interval,
        max_chunk=settings.chunk_limit,
        control_cap=control_cap,
        invalid_action_handling=settings.invalid_action_handling,
        response_timeout_s=settings.response_timeout_s,
        episode_wall_time_s=settings.episode_wall_time_s,
        proprio=settings.proprio,
        settling_controls=settling_controls,
    )


@dataclass(frozen=True)
class Awaiting:
    """Where an episode waits: the decision on `delivery`, from `transport`, within
    `timeout_s` of its publication at `published_at` (monotonic). Whoever drives the
    episode answers with the `DecisionOutcome`."""

    transport: Transport
    delivery: Delivery
    limits: ActionLimits
    timeout_s: float
    published_at: float


@dataclass(frozen=True)
class Ending:
    """Yielded once the simulator is no longer needed, before the episode's own clean-up
    (the actor's stop, video, evidence, the result written last): a worker with several
    live episodes gives the simulator back and finishes the episode off its serving
    thread. `result` is the runner's. Answer with None."""

    result: EpisodeResult


# An episode as a generator: it yields each wait (and its `Ending`) and returns its
# result. One driver waits on one transport (`drive`); a worker's slots wait on many.
EpisodeSteps = Generator["Awaiting | Ending", "DecisionOutcome | None", EpisodeResult]


def drive(steps: EpisodeSteps) -> EpisodeResult:
    """Run an episode alone: every wait is a blocking wait on its transport.

    An error raised while waiting (the evidence cannot be written, say) is raised inside
    the episode, where the runner types it, as if the wait were its own."""
    try:
        waiting = next(steps)
        while True:
            if isinstance(waiting, Ending):
                waiting = steps.send(None)
                continue
            try:
                outcome = waiting.transport.await_decision(
                    waiting.delivery, waiting.limits, waiting.timeout_s
                )
            except Exception as exc:
                waiting = steps.throw(exc)
                continue
            waiting = steps.send(outcome)
    except StopIteration as finished:
        result: EpisodeResult = finished.value
        return result


class FrameSink(Protocol):
    """Receives the camera frames of every executed control (video evidence)."""

    def add(self, frames: Mapping[str, Image]) -> None: ...


class EpisodeRunner:
    def __init__(
        self, adapter: Simulator, settings: RunSettings, video: FrameSink | None = None
    ) -> None:
        self.adapter = adapter
        self.settings = settings
        self.video = video

    def check_configuration(self, reference_horizon: int) -> None:
        """Adapter and runner must agree on the cap before any episode starts."""
        self.settings.check_adapter_cap(self.adapter.control_cap, reference_horizon)

    def run(
        self, request: EpisodeRequest, transport: Transport, evidence: EpisodeEvidence
    ) -> EpisodeResult:
        return drive(self.steps(request, transport, evidence))

    def steps(
        self, request: EpisodeRequest, transport: Transport, evidence: EpisodeEvidence
    ) -> EpisodeSteps:
        """The episode, yielding at each wait for a decision (see `drive`)."""
        settings = self.settings
        control_cap = settings.control_cap(request.reference_horizon)
        self.check_configuration(request.reference_horizon)
        started_at, t0 = utc_timestamp(), time.monotonic()
        state = _State(counters=Counters())
        start: EpisodeStart | None = None
        last_sequence = 0
        settled = False
        try:
            start = self.adapter.start_episode(
                request.identity, request.init_state_index, request.seed
            )
            state.counters.settling_controls = start.settling_controls
            with CLOCK.phase("settle_heap"):
                settle_heap()
            settled = True
            evidence.event(
                "episode_started",
                settling_controls=start.settling_controls,
                success_during_settling=start.success_during_settling,
                simulator=simulator_holding(self.adapter, started=True),
            )
            # The wall-time limit covers the policy loop, not reset and settling.
            last_sequence = yield from self._policy_loop(
                request, start, transport, evidence, state, time.monotonic()
            )
        except EndpointTamperedError as exc:
            _end_with_error(
                state,
                "protocol_error",
                exc.reason.value,
                str(exc)[:2000],
                # the call whose observation could not be published
                state.counters.policy_calls + 1,
            )
        except (SimulatorError, PackageError, OSError) as exc:
            # A benchmark package missing or a file of it refused (its initial states) is
            # the simulator's failure too: the episode could not be run as the task says.
            simulator_failed = isinstance(exc, (SimulatorError, PackageError))
            _end_with_error(
                state,
                "infrastructure_error",
                "simulator_exception" if simulator_failed else "io_error",
                str(exc)[:2000],
                state.counters.policy_calls or None,
            )
        finally:
            if settled:
                thaw_heap()
            transport.close(last_sequence)
        outcome: Outcome
        if state.termination == "native_success":
            outcome = "success"
        elif state.errors:
            outcome = "error"
        else:
            outcome = "failure"
        ident = request.identity
        result = EpisodeResult(
            attempt_id=request.attempt_id,
            case_id=request.case_id,
            outcome=outcome,
            termination=state.termination,
            truncated=state.truncation is not None,
            truncation=state.truncation,
            counters=state.counters,
            latency=Latency.of(state.latencies_ms),
            queue_delay=Latency.of(state.queue_delays_ms),
            processing=Latency.of(state.processing_ms),
            usage=Usage(),
            errors=state.errors,
            case=CaseRecord.of(
                ident,
                init_state_index=request.init_state_index,
                seed=request.seed,
                state_sha256=start.state_sha256 if start else "0" * 64,
            ),
            settings=settings_record(
                settings,
                control_cap,
                family(ident.benchmark).observation_spec.settling_controls,
            ),
            blinded=True,
            confinement=request.confinement,
            instructions_version=request.instructions_version,
            simulator=simulator_holding(self.adapter, started=start is not None),
            enforcement=request.enforcement,
            started_at=started_at,
            finished_at=utc_timestamp(),
            wall_time_s=round(time.monotonic() - t0, 3),
        )
        evidence.event(
            "episode_finished",
            outcome=result.outcome,
            termination=result.termination,
            truncation=result.truncation,
            counters=result.counters.model_dump(),
        )
        return result

    def _policy_loop(
        self,
        request: EpisodeRequest,
        start: EpisodeStart,
        transport: Transport,
        evidence: EpisodeEvidence,
        state: _State,
        t0: float,
    ) -> Generator[Awaiting | Ending, DecisionOutcome | None, int]:
        try:
            return (yield from self._decisions(request, start, transport, evidence, state, t0))
        finally:
            if state.served is not None:  # the last decision: no observation followed
                _record_timing(evidence, state, None)

    def _decisions(
        self,
        request: EpisodeRequest,
        start: EpisodeStart,
        transport: Transport,
        evidence: EpisodeEvidence,
        state: _State,
        t0: float,
    ) -> Generator[Awaiting | Ending, DecisionOutcome | None, int]:
        """Observation, response, execution, until a budget, an ending or native success."""
        terms = self._terms(request)
        c = state.counters
        capture: Capture = start.capture
        feedback: Feedback | None = None
        sequence = 0
        while True:
            wall_left = self._wall_left(t0)
            truncation = _budget_spent(terms, c, wall_left)
            if truncation is not None:
                state.truncation = truncation
                return sequence
            sequence += 1
            delivery = _observation(terms, sequence, capture, c, feedback)
            published = _publish(delivery, transport, evidence, state)
            timeout = self.settings.response_timeout_s
            if wall_left is not None:
                timeout = min(timeout, wall_left)
            answer = yield Awaiting(transport, delivery, terms.limits, timeout, published)
            if answer is None:
                raise TypeError("a wait for a decision was answered with nothing")
            decision: DecisionOutcome = answer
            CLOCK.begin_cycle()
            if not isinstance(decision, Accepted | Invalid):
                self._end_unanswered(decision, state, wall_left, timeout)
                return sequence
            _count_judged(transport, state, sequence, published)
            if isinstance(decision, Invalid):
                c.rejected_responses += 1
                if self.settings.invalid_action_handling == "terminal":
                    _end_with_error(
                        state,
                        "policy_error",
                        decision.reason,
                        "; ".join(i.message for i in decision.issues)[:2000],
                        c.policy_calls,
                    )
                    return sequence
                feedback = bounded_feedback(sequence, decision.issues)
                continue  # same capture, nothing executed
            feedback = None
            if decision.decision == "stop":
                c.stop_responses += 1
                if c.action_decisions >= self.settings.min_decisions_before_stop:
                    state.termination = "actor_stop"
                    return sequence
                feedback = self._stop_deferred(sequence)
                continue
            c.action_decisions += 1
            capture_next = self._execute(decision, terms.control_cap, state, evidence, sequence)
            if state.termination == "native_success":
                return sequence
            if capture_next is not None:
                capture = capture_next

    def _terms(self, request: EpisodeRequest) -> _Terms:
        settings = self.settings
        control_cap = settings.control_cap(request.reference_horizon)
        benchmark = request.identity.benchmark
        spec, limits = published_action(
            family(benchmark).action_spec,
            family_protocol(benchmark),
            replan_interval=settings.replan_interval,
            max_chunk=settings.chunk_limit,
        )
        return _Terms(
            instruction=request.identity.instruction,
            control_cap=control_cap,
            max_policy_calls=settings.max_policy_calls,
            limits=limits,
            spec=spec,
            # In horizon mode the cap is the suite's reference horizon: publishing it would
            # tell the actor which suite it is in, so actors see it only in decisions mode.
            public_cap=control_cap if settings.budget_mode == "decisions" else None,
        )

    def _end_unanswered(
        self,
        decision: TimedOut | PolicyFailed | InfrastructureFailed | ProtocolError,
        state: _State,
        wall_left: float | None,
        timeout: float,
    ) -> None:
        """Type the ending of an observation that no judged response answered.

        A policy call is an observation answered by a judged response (accepted or
        rejected): a missing answer or a transport break ends the episode instead, typed
        and tied to the call it happened in, so that
        policy_calls == action_decisions + rejected_responses + stop_responses."""
        policy_call = state.counters.policy_calls + 1
        if isinstance(decision, TimedOut):
            if wall_left is not None and wall_left <= self.settings.response_timeout_s:
                state.truncation = "wall_time"
            else:
                _end_with_error(
                    state,
                    "actor_timeout",
                    "response_deadline_missed",
                    f"no response within {timeout:.1f} s",
                    policy_call,
                )
        elif isinstance(decision, PolicyFailed) and decision.truncation is not None:
            state.truncation = decision.truncation  # a budget the method declared, spent
        elif isinstance(decision, PolicyFailed):
            _end_with_error(state, "policy_error", decision.code, decision.message, policy_call)
        elif isinstance(decision, InfrastructureFailed):
            _end_with_error(
                state, "infrastructure_error", decision.code, decision.message, policy_call
            )
        else:
            _end_with_error(
                state, "protocol_error", decision.reason.value, decision.message, policy_call
            )

    def _stop_deferred(self, sequence: int) -> Feedback:
        """The feedback to a stop that comes before this method's persistence rule allows."""
        return bounded_feedback(
            sequence,
            (
                Issue(
                    "stop_deferred",
                    "this method's persistence rule needs "
                    f"{self.settings.min_decisions_before_stop} action decisions before stop",
                ),
            ),
        )

    def _wall_left(self, t0: float) -> float | None:
        limit = self.settings.episode_wall_time_s
        return None if limit is None else limit - (time.monotonic() - t0)

    def _execute(
        self,
        decision: Accepted,
        control_cap: int,
        state: _State,
        evidence: EpisodeEvidence,
        sequence: int,
    ) -> Capture | None:
        """Run the declared prefix; render only if another observation will follow."""
        c = state.counters
        settings = self.settings
        prefix = decision.actions[
            : min(settings.replan_interval, control_cap - c.executed_controls)
        ]
        calls_left = settings.max_policy_calls is None or c.policy_calls < settings.max_policy_calls
        observe_after = calls_left and c.executed_controls + len(prefix) < control_cap
        capture: Capture | None = None
        executed = 0
        for i, action in enumerate(prefix):
            last = i == len(prefix) - 1
            result = self.adapter.step(action, observe=last and observe_after)
            executed += 1
            c.executed_controls += 1
            step: dict[str, object] = {
                "frame_index": c.executed_controls - 1,
                "policy_call": c.policy_calls,
                "action": list(action),
                "native_success": result.success,
            }
            if result.state is not None:
                step["state"] = list(result.state)
            evidence.step(step)
            if self.video is not None and result.frames is not None:
                self.video.add(result.frames)
            if result.success:
                c.first_success_control = c.executed_controls
                c.first_success_policy_call = c.policy_calls
                state.termination = "native_success"
                break
            capture = result.capture
        # Written once the next observation is out (or with the episode's next record).
        evidence.defer_event(
            "actions_executed",
            sequence=sequence,
            chunk_length=len(decision.actions),
            executed_prefix=[list(a) for a in decision.actions[:executed]],
            executed_controls_total=c.executed_controls,
            native_success=state.termination == "native_success",
        )
        return capture
