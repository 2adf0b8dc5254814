"""The public observation cannot carry privileged state: not in the model, not in the schema."""

from __future__ import annotations

import copy
from typing import Any

import pytest
from mailroom.mailbox.messages import Observation
from mailroom.mailbox.schemas import load_schema, schema_errors
from pydantic import ValidationError

PUBLIC_FIELDS = {
    "schema",
    "request_id",
    "sequence",
    "response_file",
    "instruction",
    "images",
    "proprio",
    "action_spec",
    "counters",
    "feedback",
    "history",
}
PRIVILEGED = [
    "object_poses",
    "robot0_eef_pos",
    "eef_pos",
    "reward",
    "success",
    "done",
    "seed",
    "init_state_index",
    "suite",
    "task_name",
    "task_index",
    "bddl",
    "sim_state",
    "world_pose",
]


def _valid() -> dict[str, Any]:
    return {
        "schema": "mailroom.observation/v1",
        "request_id": "0" * 32,
        "sequence": 1,
        "response_file": "inbox/resp-1.json",
        "instruction": "do the thing",
        "images": {
            "agentview": {
                "file": "outbox/obs-1-agentview.png",
                "width": 256,
                "height": 256,
                "encoding": "png/rgb8",
            }
        },
        "proprio": None,
        "action_spec": {
            "dimension": 7,
            "low": -1,
            "high": 1,
            "layout": list("abcdefg"),
            "controller": "OSC_POSE",
            "control_hz": 20,
            "replan_interval": 5,
            "max_chunk": 5,
        },
        "counters": {
            "policy_calls": 0,
            "max_policy_calls": 10,
            "executed_controls": 0,
            "max_controls": 50,
            "rejected_responses": 0,
        },
        "feedback": None,
        "history": "current_observation_only",
    }


def test_the_public_fields_are_exactly_the_protocols() -> None:
    assert set(load_schema("mailroom.observation/v1")["properties"]) == PUBLIC_FIELDS
    assert {f.alias or name for name, f in Observation.model_fields.items()} == PUBLIC_FIELDS
    assert schema_errors("mailroom.observation/v1", _valid()) == []
    Observation.model_validate(_valid())


@pytest.mark.parametrize("field", PRIVILEGED)
@pytest.mark.parametrize("where", ["top", "proprio", "counters"])
def test_privileged_fields_are_refused_everywhere(field: str, where: str) -> None:
    doc = copy.deepcopy(_valid())
    if where == "top":
        doc[field] = [0.1, 0.2, 0.3]
    elif where == "proprio":
        doc["proprio"] = {"joint_pos": [0.0] * 7, "gripper_qpos": [0.0] * 2, field: [0.1]}
    else:
        doc["counters"][field] = 1
    assert schema_errors("mailroom.observation/v1", doc) != []
    with pytest.raises(ValidationError):
        Observation.model_validate(doc)
