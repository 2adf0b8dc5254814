"""Declared run settings: budgets, chunking, invalid-action handling, outbox durability."""

from __future__ import annotations

from typing import Annotated, Literal

from mailroom.mailbox.publish import OutboxDurability
from mailroom.mailbox.watcher import WatchMode
from mailroom.orchestrator.records.terms import BudgetMode, InvalidActionHandling
from pydantic import BaseModel, ConfigDict, Field, model_validator

RecordMode = Literal["full", "minimal"]
MAX_CHUNK_LIMIT = 64  # the frozen response schema's maxItems


class ConfigurationError(ValueError):
    """Settings that contradict each other: refused before any episode starts."""


class RunSettings(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    budget_mode: BudgetMode = "decisions"
    max_policy_calls: Annotated[int, Field(ge=1)] | None = 200
    replan_interval: Annotated[int, Field(ge=1, le=MAX_CHUNK_LIMIT)] = 5
    max_chunk: Annotated[int, Field(ge=1, le=MAX_CHUNK_LIMIT)] | None = None
    invalid_action_handling: InvalidActionHandling = "feedback"
    response_timeout_s: Annotated[float, Field(gt=0)] = 600.0
    episode_wall_time_s: Annotated[float, Field(gt=0)] | None = None
    proprio: bool = False
    watch_mode: WatchMode = "inotify"
    min_decisions_before_stop: Annotated[int, Field(ge=0)] = 0
    outbox_durability: OutboxDurability = "atomic"

    @model_validator(mode="after")
    def _consistent(self) -> RunSettings:
        if self.budget_mode == "decisions" and self.max_policy_calls is None:
            raise ValueError("budget_mode 'decisions' needs max_policy_calls (D)")
        if self.max_chunk is not None and self.max_chunk < self.replan_interval:
            raise ValueError("max_chunk must be at least replan_interval")
        return self

    @property
    def chunk_limit(self) -> int:
        return self.max_chunk if self.max_chunk is not None else self.replan_interval

    def control_cap(self, reference_horizon: int) -> int:
        """`horizon`: the catalog's reference horizon; `decisions`: D x K."""
        if self.budget_mode == "horizon":
            return reference_horizon
        assert self.max_policy_calls is not None
        return self.max_policy_calls * self.replan_interval

    def check_adapter_cap(self, adapter_cap: int, reference_horizon: int) -> None:
        expected = self.control_cap(reference_horizon)
        if adapter_cap != expected:
            raise ConfigurationError(
                f"adapter control cap {adapter_cap} != runner cap {expected} "
                f"({self.budget_mode} mode)"
            )
