"""The episode result document (`mailroom.episode_result/v1`): private, written last."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Literal

from mailroom.mailbox.messages import WireComplete
from pydantic import AfterValidator, ConfigDict, Field

from .settings import BudgetMode, InvalidActionHandling

RESULT_SCHEMA: Literal["mailroom.episode_result/v1"] = "mailroom.episode_result/v1"
Outcome = Literal["success", "failure", "error"]
Termination = Literal[
    "native_success",
    "actor_stop",
    "policy_error",
    "protocol_error",
    "actor_timeout",
    "infrastructure_error",
]
Truncation = Literal["control_cap", "policy_call_cap", "wall_time"]
ErrorKind = Literal[
    "policy_error", "protocol_error", "actor_timeout", "infrastructure_error", "interrupted"
]
NonNegative = Annotated[int, Field(ge=0)]
Sha256 = Annotated[str, Field(pattern=r"^[0-9a-f]{64}$")]


def _rfc3339(value: str) -> str:
    """A date-time as the frozen schema's `format: date-time` means it (with a zone)."""
    try:
        parsed = datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError as exc:
        raise ValueError(f"{value!r} is not an RFC 3339 date-time") from exc
    if parsed.tzinfo is None or "T" not in value.upper():
        raise ValueError(f"{value!r} is not an RFC 3339 date-time with a time zone")
    return value


Timestamp = Annotated[str, AfterValidator(_rfc3339)]


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


class Usage(Strict):
    """A file mailbox cannot meter provider activity: explicit nulls, never zeros."""

    provider_requests: None = None
    input_tokens: None = None
    output_tokens: None = None
    cost: None = None
    source: Literal["unavailable_file_mailbox"] = "unavailable_file_mailbox"


class TypedError(Strict):
    kind: ErrorKind
    code: Annotated[str, Field(pattern=r"^[a-z_]{1,60}$")]
    message: Annotated[str, Field(max_length=2000)]
    policy_call: Annotated[int, Field(ge=1)] | None


class CaseRecord(Strict):
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
    schema_: Literal["mailroom.episode_result/v1"] = Field(default=RESULT_SCHEMA, alias="schema")
    attempt_id: Annotated[str, Field(min_length=1)]
    case_id: Annotated[str, Field(min_length=1)]
    outcome: Outcome
    termination: Termination | None
    truncated: bool
    truncation: Truncation | None
    counters: Counters
    latency: Latency
    usage: Usage
    errors: list[TypedError]
    case: CaseRecord
    settings: SettingsRecord
    blinded: bool
    started_at: Timestamp
    finished_at: Timestamp
    wall_time_s: Annotated[float, Field(ge=0)]

    model_config = ConfigDict(extra="forbid", populate_by_name=True)

    def document(self) -> dict[str, object]:
        return self.model_dump(mode="json", by_alias=True)
