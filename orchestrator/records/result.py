"""The episode result document (`mailroom.episode_result/v8`): private, written last.

This is the current version, the only one written; a result of an earlier version is
read through `records/upgrade.py`, which fills what it did not record with null (see
each field) and says why nothing metered it (`Usage.source`). The version history is
CHANGELOG.md; the JSON Schema of this version is generated from these models
(`records/generate_schemas.py`).
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Annotated, Literal, Protocol

from mailroom.mailbox.messages import WireComplete
from mailroom.orchestrator.records.confinement import ConfinementRecord
from mailroom.orchestrator.records.provider import ProviderKind
from mailroom.orchestrator.records.terms import BudgetMode, InvalidActionHandling
from pydantic import (
    AfterValidator,
    ConfigDict,
    Field,
    model_validator,
)

RESULT_SCHEMA: Literal["mailroom.episode_result/v8"] = "mailroom.episode_result/v8"
# How an attempt's simulator was held while it was live (`sim.parked`).
SimulatorHolding = Literal["parked", "dedicated"]
# A result's `simulator`: how it was held, or "none" (the episode never started).
ResultSimulator = Literal["parked", "dedicated", "none"]
# Whether the kernel held an actor to its memory ceiling (`actors.memory_cgroup`).
MemoryEnforced = Literal["enforced", "not enforced"]
# How an actor's scratch/, /tmp and /dev/shm were bounded: a tmpfs of its own bounded by
# the kernel, or the scratch quota sampled while the orchestrator waits
# (`actors.actor_filesystem`).
WritableSpace = Literal["kernel", "sampled"]
Outcome = Literal["success", "failure", "error"]
Termination = Literal[
    "native_success",
    "actor_stop",
    "policy_error",
    "protocol_error",
    "actor_timeout",
    "infrastructure_error",
]
# `provider_budget`: a provider budget the method declared, spent.
Truncation = Literal["control_cap", "policy_call_cap", "wall_time", "provider_budget"]
ErrorKind = Literal[
    "policy_error", "protocol_error", "actor_timeout", "infrastructure_error", "interrupted"
]
NonNegative = Annotated[int, Field(ge=0)]
Sha256 = Annotated[str, Field(pattern=r"^[0-9a-f]{64}$")]
# An actor instructions version as a result records it ("v1", "v2", ...).
InstructionsVersion = Annotated[str, Field(pattern=r"^v[1-9][0-9]*$")]


def _rfc3339(value: str) -> str:
    """A date-time as the frozen schema's `format: date-time` means it (with a zone)."""
    try:
        parsed = datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError as exc:
        raise ValueError(f"{value!r} is not an RFC 3339 date-time") from exc
    if parsed.tzinfo is None or "T" not in value.upper():
        raise ValueError(f"{value!r} is not an RFC 3339 date-time with a time zone")
    return value


Timestamp = Annotated[
    str, AfterValidator(_rfc3339), Field(json_schema_extra={"format": "date-time"})
]


class Strict(WireComplete):
    model_config = ConfigDict(extra="forbid")


# The counters that add up across episodes (first-success fields are per episode).
SUMMED_COUNTERS = (
    "policy_calls",
    "action_decisions",
    "rejected_responses",
    "stop_responses",
    "executed_controls",
    "settling_controls",
)


class Counters(Strict):
    policy_calls: NonNegative = 0
    action_decisions: NonNegative = 0
    rejected_responses: NonNegative = 0
    stop_responses: NonNegative = 0
    executed_controls: NonNegative = 0
    settling_controls: NonNegative = 0
    first_success_control: Annotated[int, Field(ge=1)] | None = None
    first_success_policy_call: Annotated[int, Field(ge=1)] | None = None


class Latency(Strict):
    samples: NonNegative
    median_ms: Annotated[float, Field(ge=0)] | None
    max_ms: Annotated[float, Field(ge=0)] | None
    total_ms: Annotated[float, Field(ge=0)]

    @classmethod
    def of(cls, samples_ms: Sequence[float]) -> Latency:
        return cls(
            samples=len(samples_ms),
            median_ms=statistics.median(samples_ms) if samples_ms else None,
            max_ms=max(samples_ms) if samples_ms else None,
            total_ms=sum(samples_ms),
        )


# Why nothing metered a result's provider usage: a file mailbox cannot (an external
# actor, an actor without the provider gateway, an episode that ended before its actor
# reached it), or the result was recorded before the provider gateway existed.
UnmeteredSource = Literal["unavailable_file_mailbox", "unavailable_before_gateway"]
UNMETERED_BEFORE_GATEWAY: Literal["unavailable_before_gateway"] = "unavailable_before_gateway"


class Usage(Strict):
    """Nothing metered the actor's provider activity: explicit nulls, never zeros, and
    `source` says why."""

    provider_requests: None = None
    input_tokens: None = None
    output_tokens: None = None
    cost: None = None
    source: UnmeteredSource = "unavailable_file_mailbox"


# An answer that named no model is counted under this name (`ModelUsage.model`).
UNKNOWN_MODEL = "unknown"
# Token-like counts a provider reports per answer; `ProviderUsage` totals each over models.
TOKEN_COUNTS = (
    "input_tokens",
    "output_tokens",
    "cache_read_tokens",
    "cache_write_tokens",
    "server_tool_uses",
)
Cost = Annotated[float, Field(ge=0, allow_inf_nan=False)]
CostNote = Annotated[str, Field(min_length=1, max_length=500)]
ModelName = Annotated[str, Field(min_length=1, max_length=200)]
Milliseconds = Annotated[float, Field(ge=0, allow_inf_nan=False)]


# Recorded float figures may be rounded at each addition: times to the microsecond,
# costs to a millionth of a dollar (`_same_sum`).
MS_RESOLUTION = 1e-3
USD_RESOLUTION = 1e-6


def _same_sum(
    recorded: float, parts: Sequence[float], *, resolution: float, additions: int
) -> bool:
    """Whether a recorded float total is its parts' sum, each of `additions` additions
    allowed to have been rounded to `resolution` (another order of addition moves only
    the last bits, also covered)."""
    slack = resolution * max(additions, 1)
    return math.isclose(recorded, math.fsum(parts), rel_tol=1e-9, abs_tol=slack)


def _check_cost_note(cost: float | None, note: str | None) -> None:
    """A cost, or why there is none: never both, never neither."""
    if (cost is None) == (note is None):
        raise ValueError("cost_note says why cost is null, and is null exactly when it is not")


class ModelUsage(Strict):
    """What one answering model used over an attempt (`ProviderUsage.models`): the
    forwarded requests answered naming it (`UNKNOWN_MODEL` for those naming none), its
    tokens, and their cost from the run's price table (None with a note saying why: a
    model the table does not price, a request without complete usage fields)."""

    model: ModelName
    requests: Annotated[int, Field(ge=1)]
    input_tokens: NonNegative
    output_tokens: NonNegative
    cache_read_tokens: NonNegative
    cache_write_tokens: NonNegative
    server_tool_uses: NonNegative
    cost: Cost | None
    cost_note: CostNote | None

    @model_validator(mode="after")
    def _cost_or_why_not(self) -> ModelUsage:
        _check_cost_note(self.cost, self.cost_note)
        return self


class DecisionUsage(Strict):
    """What the forwarded requests made while one decision's observation was pending
    used (decision 0: before the first observation was published)."""

    decision: NonNegative
    requests: Annotated[int, Field(ge=1)]
    provider_time_ms: Milliseconds
    input_tokens: NonNegative
    output_tokens: NonNegative


class ProviderUsage(Strict):
    """What the provider gateway metered of one attempt's actor, from the
    provider's own usage fields; request and response bodies are never kept.

    The counts add up, so a reader can trust any one of them:
    - every request the gateway forwarded is in `provider_requests`, whatever came back;
      `refused_requests` were never forwarded and are in no other count;
    - `failed_requests` are the forwarded ones that ended in a provider fault (429, 5xx,
      connection or TLS failure, a cut stream): not answers, so they name no model and
      carry no tokens (a cut stream's partial usage is incomplete);
    - `other_requests` are answers that reported no usage and named no model (a model
      list, a token count): they cost nothing and answer as no model;
    - the remaining forwarded requests are generations: each counts in exactly one of
      `models` (`UNKNOWN_MODEL` when it named none), so the models' requests sum to
      `provider_requests - failed_requests - other_requests`; `unmetered_requests` are
      generations without complete usage fields (they count what they did report);
    - each token total is the sum over `models`, and `cost` is their costs' sum (None,
      with `cost_note`, exactly when a model's cost is None);
    - float sums may be rounded at each addition (`MS_RESOLUTION`, `USD_RESOLUTION`);
    - `decisions` attribute every forwarded request, failed ones included, to the
      decision whose observation was pending: their requests sum to `provider_requests`,
      their tokens to the totals, their time to `provider_time_ms`;
    - `model_verified` is None without a declared model or without an answer, else
      whether every answer named the declared model exactly.
    `models` and `decisions` are sorted (by name, by decision), each entry once.
    """

    source: Literal["gateway"]
    provider: ProviderKind
    provider_requests: NonNegative
    refused_requests: NonNegative
    failed_requests: NonNegative
    other_requests: NonNegative
    unmetered_requests: NonNegative
    input_tokens: NonNegative
    output_tokens: NonNegative
    cache_read_tokens: NonNegative
    cache_write_tokens: NonNegative
    server_tool_uses: NonNegative
    cost: Cost | None
    cost_note: CostNote | None
    models: list[ModelUsage]
    declared_model: ModelName | None
    model_verified: bool | None
    provider_time_ms: Milliseconds
    decisions: list[DecisionUsage]

    @model_validator(mode="after")
    def _counts_add_up(self) -> ProviderUsage:
        _check_cost_note(self.cost, self.cost_note)
        answered = self.provider_requests - self.failed_requests - self.other_requests
        if answered < 0:
            raise ValueError("failed_requests and other_requests are parts of provider_requests")
        if self.unmetered_requests > answered:
            raise ValueError(
                "unmetered_requests are a part of the generations "
                "(provider_requests - failed_requests - other_requests)"
            )
        names = [m.model for m in self.models]
        if names != sorted(set(names)):
            raise ValueError("models are sorted by model name, each once")
        if sum(m.requests for m in self.models) != answered:
            raise ValueError(
                "the models' requests sum to provider_requests - failed_requests - other_requests"
            )
        for name in TOKEN_COUNTS:
            if getattr(self, name) != sum(getattr(m, name) for m in self.models):
                raise ValueError(f"{name} is the sum of the models' {name}")
        costs = [m.cost for m in self.models if m.cost is not None]
        if (self.cost is None) != (len(costs) < len(self.models)):
            raise ValueError("cost is null exactly when a model's cost is null")
        additions = len(costs) + 1
        if self.cost is not None and not _same_sum(
            self.cost, costs, resolution=USD_RESOLUTION, additions=additions
        ):
            raise ValueError("cost is the sum of the models' costs")
        indices = [d.decision for d in self.decisions]
        if indices != sorted(set(indices)):
            raise ValueError("decisions are sorted by decision, each once")
        if sum(d.requests for d in self.decisions) != self.provider_requests:
            raise ValueError("the decisions' requests sum to provider_requests")
        for name in ("input_tokens", "output_tokens"):
            if getattr(self, name) != sum(getattr(d, name) for d in self.decisions):
                raise ValueError(f"{name} is the sum of the decisions' {name}")
        times = [d.provider_time_ms for d in self.decisions]
        additions = self.provider_requests + 1
        if not _same_sum(
            self.provider_time_ms, times, resolution=MS_RESOLUTION, additions=additions
        ):
            raise ValueError("provider_time_ms is the sum of the decisions' provider_time_ms")
        verified = (
            None
            if self.declared_model is None or not self.models
            else all(m.model == self.declared_model for m in self.models)
        )
        if self.model_verified is not verified:
            raise ValueError(
                "model_verified is null without a declared model or an answer, else whether "
                "every answer named the declared model"
            )
        return self


class TypedError(Strict):
    kind: ErrorKind
    code: Annotated[str, Field(pattern=r"^[a-z_]{1,60}$")]
    message: Annotated[str, Field(max_length=2000)]
    policy_call: Annotated[int, Field(ge=1)] | None


class NamedTask(Protocol):
    """What a result keeps of the task the simulator built: its names, its instruction
    and its files' hashes (the simulator's `sim.base.TaskIdentity` has them)."""

    @property
    def benchmark(self) -> str: ...
    @property
    def suite(self) -> str: ...
    @property
    def task_index(self) -> int: ...
    @property
    def task_order_index(self) -> int: ...
    @property
    def task_name(self) -> str: ...
    @property
    def instruction(self) -> str: ...
    @property
    def bddl_sha256(self) -> str: ...
    @property
    def init_states_sha256(self) -> str: ...


class CaseRecord(Strict):
    """The case as a result document names it: the `Case` plus the task's name,
    instruction and the hashes of the files and the state that were installed, so a
    result can be checked against the catalog without the plan."""

    benchmark: str
    suite: str
    task_index: NonNegative
    task_name: str
    instruction: str
    init_state_index: NonNegative
    task_order_index: NonNegative
    seed: int
    bddl_sha256: Sha256
    init_states_sha256: Sha256
    state_sha256: Sha256

    @classmethod
    def of(
        cls, identity: NamedTask, *, init_state_index: int, seed: int, state_sha256: str
    ) -> CaseRecord:
        """The one way a result names its case: the task's identity plus this attempt's
        initial state, seed and the hash of the state installed."""
        return cls(
            benchmark=identity.benchmark,
            suite=identity.suite,
            task_index=identity.task_index,
            task_name=identity.task_name,
            instruction=identity.instruction,
            init_state_index=init_state_index,
            task_order_index=identity.task_order_index,
            seed=seed,
            bddl_sha256=identity.bddl_sha256,
            init_states_sha256=identity.init_states_sha256,
            state_sha256=state_sha256,
        )


class Enforcement(Strict):
    """Whether the kernel enforced the attempt's actor's limits."""

    memory: MemoryEnforced
    writable_space: WritableSpace

    @classmethod
    def of_actor(cls, started: Mapping[str, object] | None) -> Enforcement:
        """From what an actor's `actor_started` event records (its `memory`, from
        `memory_cgroup.ceiling_record`, and its `filesystem`, from
        `actor_filesystem.filesystem_record`); None for an actor the orchestrator did not
        start (an external one, or an attempt that ended before its actor started): not
        enforced, sampled. A record that does not say so counts as not enforced."""
        memory = started.get("memory") if started is not None else None
        space = started.get("filesystem") if started is not None else None
        enforced = isinstance(memory, Mapping) and memory.get("enforced") is True
        kernel = isinstance(space, Mapping) and space.get("enforced") == "kernel"
        return cls(
            memory="enforced" if enforced else "not enforced",
            writable_space="kernel" if kernel else "sampled",
        )


class SettingsRecord(Strict):
    budget_mode: BudgetMode
    max_policy_calls: Annotated[int, Field(ge=1)] | None
    replan_interval: Annotated[int, Field(ge=1)]
    max_chunk: Annotated[int, Field(ge=1)]
    control_cap: Annotated[int, Field(ge=1)]
    invalid_action_handling: InvalidActionHandling
    response_timeout_s: Annotated[float, Field(gt=0)]
    episode_wall_time_s: Annotated[float, Field(gt=0)] | None
    proprio: bool
    settling_controls: NonNegative


class EpisodeResult(Strict):
    """One attempt's result. A null `confinement`, `queue_delay`, `processing`,
    `instructions_version`, `simulator` or `enforcement` was not recorded (a result
    upgraded from a version before the field); every result written now records each."""

    schema_: Literal["mailroom.episode_result/v8"] = Field(default=RESULT_SCHEMA, alias="schema")
    attempt_id: Annotated[str, Field(min_length=1)]
    case_id: Annotated[str, Field(min_length=1)]
    outcome: Outcome
    termination: Termination | None
    truncated: bool
    truncation: Truncation | None
    counters: Counters
    latency: Latency
    # The actor's time split: the queueing delay before a response was served, and the
    # orchestrator's processing.
    queue_delay: Latency | None = None
    processing: Latency | None = None
    # What the provider gateway metered, or the null `Usage` saying why nothing did.
    usage: Annotated[Usage | ProviderUsage, Field(discriminator="source")]
    errors: list[TypedError]
    case: CaseRecord
    settings: SettingsRecord
    blinded: bool
    # Null: not recorded (before confinement was, every spawned actor ran as the
    # evaluator's own user).
    confinement: ConfinementRecord | None = None
    # The actor instructions version the attempt's actor was handed (null: not recorded
    # here; its run's manifest names it).
    instructions_version: InstructionsVersion | None = None
    # How its simulator was held: parked in its task's shared one, its own, or "none"
    # (its episode never started); null: not recorded (each episode then had its own).
    simulator: ResultSimulator | None = None
    # Whether the kernel enforced its actor's limits; null: not recorded (unknown).
    enforcement: Enforcement | None = None
    started_at: Timestamp
    finished_at: Timestamp
    wall_time_s: Annotated[float, Field(ge=0)]

    model_config = ConfigDict(extra="forbid", populate_by_name=True)

    @model_validator(mode="after")
    def _metered_where_it_could_be(self) -> EpisodeResult:
        metered = isinstance(self.usage, ProviderUsage)
        if metered and self.confinement is not None and self.confinement.mode == "external":
            raise ValueError("an external actor's provider usage is not metered here")
        return self

    @property
    def confined(self) -> bool:
        return self.confinement is not None and self.confinement.mode == "sandbox"

    def document(self) -> dict[str, object]:
        return self.model_dump(mode="json", by_alias=True)
