"""Pydantic mirrors of the frozen mailbox schemas (protocol v1).

The JSON Schemas in `schemas/` are the contract; these models must agree with them
(tests/test_schema_model_agreement.py proves it on valid and invalid examples).
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, StrictFloat, StrictInt, model_validator

OBSERVATION_SCHEMA: Literal["mailroom.observation/v1"] = "mailroom.observation/v1"
RESPONSE_SCHEMA: Literal["mailroom.response/v1"] = "mailroom.response/v1"
CLOSED_SCHEMA: Literal["mailroom.closed/v1"] = "mailroom.closed/v1"

RequestId = Annotated[str, Field(pattern=r"^[0-9a-f]{32}$")]
Number = StrictInt | StrictFloat
Bounded = Annotated[Number, Field(ge=-1, le=1)]
ActionVector = Annotated[list[Bounded], Field(min_length=7, max_length=7)]


class Frozen(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, strict=True)


class ImageRef(Frozen):
    file: Annotated[str, Field(pattern=r"^outbox/[A-Za-z0-9._-]+\.png$")]
    width: Annotated[int, Field(ge=1)]
    height: Annotated[int, Field(ge=1)]
    encoding: Literal["png/rgb8"] = "png/rgb8"


class Proprio(Frozen):
    joint_pos: Annotated[list[Number], Field(min_length=7, max_length=7)]
    gripper_qpos: Annotated[list[Number], Field(min_length=2, max_length=2)]


class ActionSpec(Frozen):
    dimension: Literal[7] = 7
    low: Literal[-1] = -1
    high: Literal[1] = 1
    layout: Annotated[list[str], Field(min_length=7, max_length=7)]
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


class Observation(Frozen):
    schema_: Literal["mailroom.observation/v1"] = Field(default=OBSERVATION_SCHEMA, alias="schema")
    request_id: RequestId
    sequence: Annotated[int, Field(ge=1)]
    response_file: Annotated[str, Field(pattern=r"^inbox/resp-[1-9][0-9]*\.json$")]
    instruction: Annotated[str, Field(min_length=1, max_length=2000)]
    images: Annotated[dict[str, ImageRef], Field(min_length=1)]
    proprio: Proprio | None
    action_spec: ActionSpec
    counters: PublicCounters
    feedback: Feedback | None
    history: Literal["current_observation_only"] = "current_observation_only"

    model_config = ConfigDict(extra="forbid", frozen=True, strict=True, populate_by_name=True)


class Response(Frozen):
    schema_: Literal["mailroom.response/v1"] = Field(alias="schema")
    request_id: RequestId
    decision: Literal["act", "stop"]
    actions: Annotated[list[ActionVector], Field(min_length=1, max_length=64)] | None = None
    note: Annotated[str, Field(max_length=280)] | None = None

    model_config = ConfigDict(extra="forbid", frozen=True, strict=True, populate_by_name=True)

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

    model_config = ConfigDict(extra="forbid", frozen=True, strict=True, populate_by_name=True)


def to_document(model: BaseModel) -> dict[str, object]:
    """The wire form: aliases, and optional fields that are unset left out."""
    return model.model_dump(mode="json", by_alias=True, exclude_unset=False, exclude_none=False)
