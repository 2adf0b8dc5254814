"""The part of Harbor's Agent Trajectory Interchange Format (ATIF, v1.7) that mailroom
writes, as typed models: a trajectory, its agent, its steps (with tool calls, their
observed results, metrics and content parts) and its final metrics.

The shapes and rules are ATIF's (Harbor's `harbor.models.trajectories`): no field beyond
the format's (what it cannot hold goes in an `extra`), step ids 1..N in order, the
agent-only fields (`model_name`, `reasoning_content`, `tool_calls`, `metrics`) only on
steps whose source is the agent, and each result's `source_call_id` one of its own
step's tool calls. The tests hold every export to Harbor's own models and validator.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

ATIF_VERSION: Literal["ATIF-v1.7"] = "ATIF-v1.7"

NonNegative = Annotated[int, Field(ge=0)]


class _Atif(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class ImageSource(_Atif):
    media_type: Literal["image/png"]
    path: str  # relative to the trajectory file


class ContentPart(_Atif):
    type: Literal["text", "image"]
    text: str | None = None
    source: ImageSource | None = None

    @model_validator(mode="after")
    def _one_kind(self) -> ContentPart:
        holds = (self.text is not None, self.source is not None)
        if holds != ((True, False) if self.type == "text" else (False, True)):
            raise ValueError("a text part holds text only, an image part a source only")
        return self


class ToolCall(_Atif):
    tool_call_id: str
    function_name: str
    arguments: dict[str, Any]
    extra: dict[str, Any] | None = None


class ObservationResult(_Atif):
    source_call_id: str | None = None
    content: str | list[ContentPart] | None = None
    extra: dict[str, Any] | None = None


class Observation(_Atif):
    results: list[ObservationResult]


class Metrics(_Atif):
    prompt_tokens: NonNegative | None = None  # cached tokens included
    completion_tokens: NonNegative | None = None
    cached_tokens: NonNegative | None = None
    cost_usd: Annotated[float, Field(ge=0)] | None = None
    extra: dict[str, Any] | None = None


class Step(_Atif):
    step_id: Annotated[int, Field(ge=1)]
    timestamp: str | None = None
    source: Literal["system", "user", "agent"]
    model_name: str | None = None
    message: str | list[ContentPart]
    reasoning_content: str | None = None
    tool_calls: list[ToolCall] | None = None
    observation: Observation | None = None
    metrics: Metrics | None = None
    llm_call_count: NonNegative | None = None
    extra: dict[str, Any] | None = None

    @model_validator(mode="after")
    def _agent_fields(self) -> Step:
        agent_only = (self.model_name, self.reasoning_content, self.tool_calls, self.metrics)
        if self.source != "agent" and any(v is not None for v in agent_only):
            raise ValueError("model_name, reasoning_content, tool_calls, metrics: the agent's")
        if self.llm_call_count == 0 and (self.metrics or self.reasoning_content):
            raise ValueError("a step of no model call has no metrics or reasoning")
        calls = {c.tool_call_id for c in self.tool_calls or []}
        for result in self.observation.results if self.observation else []:
            if result.source_call_id is not None and result.source_call_id not in calls:
                raise ValueError(f"result of {result.source_call_id!r}: no such call here")
        return self


class Agent(_Atif):
    name: str
    version: str
    model_name: str | None = None
    extra: dict[str, Any] | None = None


class FinalMetrics(_Atif):
    total_prompt_tokens: NonNegative | None = None
    total_completion_tokens: NonNegative | None = None
    total_cached_tokens: NonNegative | None = None
    total_cost_usd: Annotated[float, Field(ge=0)] | None = None
    total_steps: NonNegative | None = None
    extra: dict[str, Any] | None = None


class Trajectory(_Atif):
    schema_version: Literal["ATIF-v1.7"] = ATIF_VERSION
    session_id: str
    trajectory_id: str | None = None  # this document's own id (v1.7)
    agent: Agent
    steps: Annotated[list[Step], Field(min_length=1)]
    notes: str | None = None
    final_metrics: FinalMetrics | None = None
    extra: dict[str, Any] | None = None

    @model_validator(mode="after")
    def _numbered(self) -> Trajectory:
        for n, step in enumerate(self.steps, start=1):
            if step.step_id != n:
                raise ValueError(f"step {n} has step_id {step.step_id}")
        return self

    def document(self) -> dict[str, Any]:
        """The JSON document, absent fields left out (as Harbor writes one)."""
        return self.model_dump(mode="json", exclude_none=True)
