"""The ATIF the export writes (`results/atif_models.py`) is Harbor's: Harbor's own models
(`harbor` 0.26.0, requirements/harbor.txt, installed without its dependencies on this
CPython 3.11) import, and a document is accepted by ours exactly when it is by Harbor's,
for a valid trajectory and for each rule the format sets."""

from __future__ import annotations

import copy
from typing import Any

import pytest
from harbor.models.trajectories import Trajectory as HarborTrajectory
from mailroom.orchestrator.results.atif_models import ATIF_VERSION, Trajectory
from pydantic import ValidationError

VALID: dict[str, Any] = {
    "schema_version": ATIF_VERSION,
    "session_id": "case-a1",
    "trajectory_id": "case-a1",
    "agent": {"name": "an_agent", "version": "sha256:00", "model_name": "m", "extra": {}},
    "steps": [
        {
            "step_id": 1,
            "timestamp": "2026-12-06T22:17:01.120Z",
            "source": "system",
            "message": "the launch message",
        },
        {
            "step_id": 2,
            "timestamp": "2026-12-06T22:17:08.948Z",
            "source": "user",
            "message": [
                {"type": "text", "text": "{}"},
                {"type": "image", "source": {"media_type": "image/png", "path": "images/a.png"}},
            ],
        },
        {
            "step_id": 3,
            "source": "agent",
            "message": "",
            "tool_calls": [
                {"tool_call_id": "c1", "function_name": "Bash", "arguments": {"shown": "ls"}}
            ],
            "observation": {"results": [{"source_call_id": "c1", "content": "obs-1.json"}]},
            "extra": {"mailroom": {"verified": False}},
        },
        {
            "step_id": 4,
            "source": "agent",
            "model_name": "m",
            "message": '{"decision": "stop"}',
            "metrics": {"prompt_tokens": 10, "completion_tokens": 2, "cached_tokens": 4},
            "llm_call_count": 1,
        },
    ],
    "final_metrics": {"total_prompt_tokens": 10, "total_steps": 4},
    "extra": {"mailroom": {}},
}


def _broken(change: str) -> dict[str, Any]:
    document = copy.deepcopy(VALID)
    steps = document["steps"]
    if change == "a step number out of order":
        steps[1]["step_id"] = 3
    elif change == "metrics on a user step":
        steps[1]["metrics"] = {"prompt_tokens": 1}
    elif change == "a model on a system step":
        steps[0]["model_name"] = "m"
    elif change == "a result of no call of its step":
        steps[2]["observation"]["results"][0]["source_call_id"] = "c9"
    elif change == "arguments as a string":
        steps[2]["tool_calls"][0]["arguments"] = "ls"
    elif change == "a field ATIF does not have":
        steps[3]["verdict"] = "accepted"
    elif change == "no steps":
        document["steps"] = []
    elif change == "a source ATIF does not have":
        steps[0]["source"] = "evaluator"
    elif change == "metrics on a step of no model call":
        steps[3]["llm_call_count"] = 0
    elif change == "an agent without a version":
        del document["agent"]["version"]
    elif change == "an image part without its source":
        del steps[1]["message"][1]["source"]
    elif change == "an image part with text":
        steps[1]["message"][1]["text"] = "a caption"
    return document


BROKEN = (
    "a step number out of order",
    "metrics on a user step",
    "a model on a system step",
    "a result of no call of its step",
    "arguments as a string",
    "a field ATIF does not have",
    "no steps",
    "a source ATIF does not have",
    "metrics on a step of no model call",
    "an agent without a version",
    "an image part without its source",
    "an image part with text",
)


def test_a_valid_trajectory_is_valid_to_both_and_written_back_the_same() -> None:
    ours = Trajectory.model_validate(VALID)
    theirs = HarborTrajectory.model_validate(VALID)
    assert ours.document() == theirs.model_dump(mode="json", exclude_none=True)


@pytest.mark.parametrize("change", BROKEN)
def test_each_rule_of_the_format_is_kept_by_both(change: str) -> None:
    document = _broken(change)
    with pytest.raises(ValidationError):
        HarborTrajectory.model_validate(document)
    with pytest.raises(ValidationError):
        Trajectory.model_validate(document)
