"""A selected case and the names the orchestrator gives it privately."""

from __future__ import annotations

from mailroom.orchestrator.records.layout import attempt_id_of
from pydantic import BaseModel, ConfigDict, Field


class Case(BaseModel):
    """What a plan selects and a worker runs: task, initial state, seed (no files).

    The work unit between plan, coordinator and episode; `case_id` and `attempt_id` name
    it in the run directory. A plan file stores it as a `PlanCase` (the frozen document's
    shape); a result stores it as a `CaseRecord` (with the hashes of what actually ran).
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    benchmark: str = "libero"
    suite: str
    task_index: int = Field(ge=0)
    init_state_index: int = Field(ge=0)
    seed: int
    task_order_index: int = Field(default=0, ge=0)

    @property
    def case_id(self) -> str:
        """Private identifier: it names the case and so never reaches an actor."""
        return (
            f"{self.suite}-t{self.task_index:03d}-i{self.init_state_index:02d}"
            f"-o{self.task_order_index}-s{self.seed}"
        )

    def attempt_id(self, attempt: int) -> str:
        return attempt_id_of(self.case_id, attempt)


DEMO_CASE = Case(suite="libero_10", task_index=0, init_state_index=0, seed=20260907)
