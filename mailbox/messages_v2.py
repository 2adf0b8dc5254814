"""Pydantic mirrors of protocol v2's frozen schemas (`mailroom.observation/v2`,
`mailroom.response/v2`); what v2 shares with v1 (images, counters, feedback) is v1's.

The schema cannot tie an action's length or bounds to the observation it answers: the
parser checks a v2 response against the `action_spec` it was sent (`ActionLimits`).
"""

from __future__ import annotations

from typing import Annotated, ClassVar, Literal

from pydantic import Field, StrictFloat, StrictInt, model_validator

from .messages import (
    MAX_INSTRUCTION_CHARS,
    Feedback,
    Frozen,
    ImageRef,
    Number,
    PublicCounters,
    RequestId,
)

OBSERVATION_V2_SCHEMA: Literal["mailroom.observation/v2"] = "mailroom.observation/v2"
RESPONSE_V2_SCHEMA: Literal["mailroom.response/v2"] = "mailroom.response/v2"

MAX_DIMENSION = 64
ComponentName = Annotated[str, Field(pattern=r"^[A-Za-z][A-Za-z0-9_]{0,63}$")]
ProprioName = Annotated[str, Field(pattern=r"^[a-z][a-z0-9_]{0,63}$")]
Bound = StrictInt | StrictFloat


class ActionSpecV2(Frozen):
    dimension: Annotated[int, Field(ge=1, le=MAX_DIMENSION)]
    low: Bound
    high: Bound
    layout: Annotated[list[ComponentName], Field(min_length=1, max_length=MAX_DIMENSION)]
    controller: Annotated[str, Field(pattern=r"^[A-Za-z][A-Za-z0-9_.-]{0,63}$")]
    control_hz: Annotated[Number, Field(gt=0)]
    replan_interval: Annotated[int, Field(ge=1)]
    max_chunk: Annotated[int, Field(ge=1)]

    @model_validator(mode="after")
    def _consistent(self) -> ActionSpecV2:
        if len(self.layout) != self.dimension:
            raise ValueError("'layout' names exactly 'dimension' components")
        if not self.low < self.high:
            raise ValueError("'low' must be below 'high'")
        return self


ProprioV2 = Annotated[
    dict[
        ProprioName,
        Annotated[list[Number], Field(min_length=1, max_length=MAX_DIMENSION)],
    ],
    Field(min_length=1, max_length=32),
]


class ObservationV2(Frozen):
    schema_: Literal["mailroom.observation/v2"] = Field(
        default=OBSERVATION_V2_SCHEMA, alias="schema"
    )
    request_id: RequestId
    sequence: Annotated[int, Field(ge=1)]
    response_file: Annotated[str, Field(pattern=r"^inbox/resp-[1-9][0-9]*\.json$")]
    instruction: Annotated[str, Field(min_length=1, max_length=MAX_INSTRUCTION_CHARS)]
    images: Annotated[dict[str, ImageRef], Field(min_length=1)]
    proprio: ProprioV2 | None
    action_spec: ActionSpecV2
    counters: PublicCounters
    feedback: Feedback | None
    history: Literal["current_observation_only"] = "current_observation_only"


class ResponseV2(Frozen):
    schema_: Literal["mailroom.response/v2"] = Field(alias="schema")
    request_id: RequestId
    decision: Literal["act", "stop"]
    actions: (
        Annotated[
            list[Annotated[list[Number], Field(min_length=1, max_length=MAX_DIMENSION)]],
            Field(min_length=1, max_length=64),
        ]
        | None
    ) = None
    note: Annotated[str, Field(max_length=280)] | None = None

    _may_be_absent: ClassVar[frozenset[str]] = frozenset({"actions", "note"})

    @model_validator(mode="after")
    def _actions_match_decision(self) -> ResponseV2:
        if self.decision == "act" and self.actions is None:
            raise ValueError("decision 'act' requires 'actions'")
        if self.decision == "stop" and self.actions is not None:
            raise ValueError("decision 'stop' must not carry 'actions'")
        return self
