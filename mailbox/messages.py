"""Pydantic mirrors of the frozen mailbox schemas (protocol v1).

The JSON Schemas in `schemas/` are the contract; these models must agree with them
(tests/contract/test_schema_model_agreement.py proves it on valid and invalid examples).

Python code may leave the protocol constants (`schema`, `history`, the action
specification's fixed values, ...) to their defaults. A document read from JSON
(`from_json`) must spell out every field, as the frozen schema requires; only the
fields a model lists in `_may_be_absent` may be left out, and those are never null.
"""

from __future__ import annotations

from typing import Annotated, Any, ClassVar, Literal, TypeVar

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    StrictFloat,
    StrictInt,
    ValidationInfo,
    model_validator,
)

from .action_dimension import ACTION_DIMENSION

OBSERVATION_SCHEMA: Literal["mailroom.observation/v1"] = "mailroom.observation/v1"
RESPONSE_SCHEMA: Literal["mailroom.response/v1"] = "mailroom.response/v1"
CLOSED_SCHEMA: Literal["mailroom.closed/v1"] = "mailroom.closed/v1"

RequestId = Annotated[str, Field(pattern=r"^[0-9a-f]{32}$")]
Number = StrictInt | StrictFloat
Bounded = Annotated[Number, Field(ge=-1, le=1)]
ActionVector = Annotated[
    list[Bounded], Field(min_length=ACTION_DIMENSION, max_length=ACTION_DIMENSION)
]


class WireComplete(BaseModel):
    """On the wire (JSON mode) every field the frozen schema requires must be written,
    even where the Python model has a default; `_may_be_absent` lists the optional ones."""

    _may_be_absent: ClassVar[frozenset[str]] = frozenset()

    @model_validator(mode="before")
    @classmethod
    def _complete_on_the_wire(cls, data: Any, info: ValidationInfo) -> Any:
        if info.mode != "json" or not isinstance(data, dict):
            return data
        for name, field in cls.model_fields.items():
            key = field.alias or name
            if key in cls._may_be_absent:
                if key in data and data[key] is None:
                    raise ValueError(f"{key!r} must be left out rather than null")
            elif key not in data:
                raise ValueError(f"missing field {key!r}")
        return data


class Frozen(WireComplete):
    model_config = ConfigDict(extra="forbid", frozen=True, strict=True)


ModelT = TypeVar("ModelT", bound=BaseModel)


def from_json(model: type[ModelT], raw: str | bytes) -> ModelT:
    """Validate a wire document: JSON text, field names as written on the wire."""
    return model.model_validate_json(raw, strict=True, by_alias=True, by_name=False)


class ImageRef(Frozen):
    file: Annotated[str, Field(pattern=r"^outbox/[A-Za-z0-9._-]+\.png$")]
    width: Annotated[int, Field(ge=1)]
    height: Annotated[int, Field(ge=1)]
    encoding: Literal["png/rgb8"] = "png/rgb8"


class Proprio(Frozen):
    joint_pos: Annotated[list[Number], Field(min_length=7, max_length=7)]
    gripper_qpos: Annotated[list[Number], Field(min_length=2, max_length=2)]


class ActionSpec(Frozen):
    dimension: Literal[7] = 7  # ACTION_DIMENSION, a constant of the frozen schema
    low: Literal[-1] = -1
    high: Literal[1] = 1
    layout: Annotated[list[str], Field(min_length=ACTION_DIMENSION, max_length=ACTION_DIMENSION)]
    controller: Literal["OSC_POSE"] = "OSC_POSE"
    control_hz: Annotated[Number, Field(gt=0)]
    replan_interval: Annotated[int, Field(ge=1)]
    max_chunk: Annotated[int, Field(ge=1)]


class PublicCounters(Frozen):
    policy_calls: Annotated[int, Field(ge=0)]
    max_policy_calls: Annotated[int, Field(ge=1)] | None
    executed_controls: Annotated[int, Field(ge=0)]
    max_controls: Annotated[int, Field(ge=1)] | None
    rejected_responses: Annotated[int, Field(ge=0)]


class FeedbackIssue(Frozen):
    code: Annotated[str, Field(pattern=r"^[a-z_]{1,40}$")]
    message: Annotated[str, Field(max_length=200)]


class Feedback(Frozen):
    rejected_sequence: Annotated[int, Field(ge=1)]
    issues: Annotated[list[FeedbackIssue], Field(min_length=1, max_length=5)]
    more_issues: Annotated[int, Field(ge=0)]


# The longest instruction an observation carries (a catalog refuses longer ones).
MAX_INSTRUCTION_CHARS = 2000


class Observation(Frozen):
    schema_: Literal["mailroom.observation/v1"] = Field(default=OBSERVATION_SCHEMA, alias="schema")
    request_id: RequestId
    sequence: Annotated[int, Field(ge=1)]
    response_file: Annotated[str, Field(pattern=r"^inbox/resp-[1-9][0-9]*\.json$")]
    instruction: Annotated[str, Field(min_length=1, max_length=MAX_INSTRUCTION_CHARS)]
    images: Annotated[dict[str, ImageRef], Field(min_length=1)]
    proprio: Proprio | None
    action_spec: ActionSpec
    counters: PublicCounters
    feedback: Feedback | None
    history: Literal["current_observation_only"] = "current_observation_only"


class Response(Frozen):
    schema_: Literal["mailroom.response/v1"] = Field(alias="schema")
    request_id: RequestId
    decision: Literal["act", "stop"]
    actions: Annotated[list[ActionVector], Field(min_length=1, max_length=64)] | None = None
    note: Annotated[str, Field(max_length=280)] | None = None

    _may_be_absent: ClassVar[frozenset[str]] = frozenset({"actions", "note"})

    @model_validator(mode="after")
    def _actions_match_decision(self) -> Response:
        if self.decision == "act" and self.actions is None:
            raise ValueError("decision 'act' requires 'actions'")
        if self.decision == "stop" and self.actions is not None:
            raise ValueError("decision 'stop' must not carry 'actions'")
        return self


class Closed(Frozen):
    schema_: Literal["mailroom.closed/v1"] = Field(default=CLOSED_SCHEMA, alias="schema")
    last_sequence: Annotated[int, Field(ge=0)]


def to_document(model: BaseModel) -> dict[str, object]:
    """The wire form: aliases, every field spelt out."""
    return model.model_dump(mode="json", by_alias=True, exclude_unset=False, exclude_none=False)
