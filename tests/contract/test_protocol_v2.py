"""Mailbox protocol v2 (`mailroom.observation/v2`, `mailroom.response/v2`) and the actor
instructions that describe it (v3): every example passes the frozen schemas and the
parser, a response is held to exactly the action spec its observation published, and
the text differs from v2's only where the robot is concerned."""

from __future__ import annotations

import json
import secrets
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from instruction_examples import examples_by_kind
from mailroom.mailbox.endpoint import Endpoint
from mailroom.mailbox.feedback import bounded_feedback
from mailroom.mailbox.messages import Closed, Feedback, PublicCounters, from_json, to_document
from mailroom.mailbox.messages_v2 import ActionSpecV2, ObservationV2, ResponseV2
from mailroom.mailbox.parser import (
    Accepted,
    ActionLimits,
    Invalid,
    InvalidReason,
    Issue,
    parse_response,
)
from mailroom.mailbox.protocol import PROTOCOL_V2
from mailroom.mailbox.publish import document_bytes
from mailroom.mailbox.schemas import schema_errors
from mailroom.orchestrator.actors.instructions import (
    GUIDE_PLACEHOLDER,
    PLACEHOLDERS,
    render_instructions,
    template_fields,
)
from mailroom.orchestrator.actors.profiles import (
    INSTRUCTION_PROTOCOLS,
    actor_instructions_template,
    instructions_for_protocol,
)
from mailroom.orchestrator.sim.base import Capture
from mailroom.orchestrator.sim.specs import ActionSpec
from mailroom.orchestrator.transport.base import Delivery
from mailroom.orchestrator.transport.observation import build_observation, observation_document
from mailroom.orchestrator.transport.published_action import published_action

TEMPLATE = actor_instructions_template("v3")
V2_TEXT = actor_instructions_template("v2")


EXAMPLES = examples_by_kind(TEMPLATE, PROTOCOL_V2.response_schema)
[OBSERVATION] = EXAMPLES["mailroom.observation/v2"]
SPEC = OBSERVATION["action_spec"]


def _limits(spec: dict[str, Any]) -> ActionLimits:
    """What an observation's action spec holds a response to, as the runner builds it."""
    action = ActionSpec(
        layout=tuple(spec["layout"]),
        low=spec["low"],
        high=spec["high"],
        controller=spec["controller"],
        control_hz=spec["control_hz"],
    )
    published, limits = published_action(
        action, PROTOCOL_V2, replan_interval=spec["replan_interval"], max_chunk=spec["max_chunk"]
    )
    assert to_document(published) == spec
    return limits


def test_the_v2_models_name_the_protocol_s_schemas() -> None:
    assert ObservationV2.model_fields["schema_"].default == PROTOCOL_V2.observation_schema
    assert ResponseV2(schema="mailroom.response/v2", request_id="0" * 32, decision="stop")


def test_v3_describes_protocol_v2_and_has_a_place_for_the_family_guide() -> None:
    assert INSTRUCTION_PROTOCOLS["v3"] == "v2"
    assert template_fields(TEMPLATE) == PLACEHOLDERS | {GUIDE_PLACEHOLDER}
    assert set(EXAMPLES) == {
        "mailroom.observation/v2",
        "response-act",
        "response-stop",
        "feedback",
        "mailroom.closed/v1",
    }


def test_the_example_observation_is_a_valid_v2_observation() -> None:
    assert schema_errors("mailroom.observation/v2", OBSERVATION) == []
    model = from_json(ObservationV2, json.dumps(OBSERVATION))
    assert model.action_spec.dimension == len(model.action_spec.layout) == 4


@pytest.mark.parametrize("kind", ["response-act", "response-stop"])
def test_every_example_response_passes_the_parser_against_the_example_spec(kind: str) -> None:
    for doc in EXAMPLES[kind]:
        outcome = parse_response(
            json.dumps(doc).encode("utf-8"),
            expected_request_id=OBSERVATION["request_id"],
            limits=_limits(SPEC),
        )
        assert isinstance(outcome, Accepted), outcome
        assert outcome.decision == kind.removeprefix("response-")
        assert all(len(v) == SPEC["dimension"] for v in outcome.actions)
        assert schema_errors("mailroom.response/v2", doc) == []
        from_json(ResponseV2, json.dumps(doc))


def test_the_example_feedback_and_closing_notice_are_valid() -> None:
    [feedback] = EXAMPLES["feedback"]
    Feedback.model_validate(feedback)
    [closed] = EXAMPLES["mailroom.closed/v1"]
    assert schema_errors("mailroom.closed/v1", closed) == []
    from_json(Closed, json.dumps(closed))


def _sections(text: str) -> str:
    """The text without its observation, actions and robot sections, its schema
    versions and its example blocks: what v3 keeps of v2 word for word."""
    head, _, rest = text.partition("\nAN OBSERVATION\n")
    _, _, tail = rest.partition("\nCHUNKS\n")
    kept = head + "\nCHUNKS\n" + tail
    for old, new in (("response/v2", "response/v1"),):
        kept = kept.replace(old, new)
    return "\n".join(line for line in kept.splitlines() if not line.startswith("    {"))


def test_v3_keeps_every_other_section_of_v2_word_for_word() -> None:
    assert _sections(TEMPLATE) == _sections(V2_TEXT)
    assert "THE AXES IN THE IMAGES" not in TEMPLATE and "agentview" not in TEMPLATE


def test_the_guide_is_handed_once_and_never_substituted_again() -> None:
    with pytest.raises(ValueError, match="actor_guide"):
        render_instructions("/mailbox/e", host="h", template=TEMPLATE)
    guide = "- [0]: forward speed; {endpoint} is not a field here"
    text = render_instructions("/mailbox/e", host="h", template=TEMPLATE, actor_guide=guide)
    assert f"THIS ROBOT\n{guide}\n\nCHUNKS" in text
    assert "{actor_guide}" not in text
    # A v1 text has no place for a guide: handing one is refused.
    with pytest.raises(ValueError, match="no place"):
        render_instructions(
            "/e", host="h", template=actor_instructions_template("v1"), actor_guide=guide
        )


def test_a_run_hands_the_text_of_its_family_s_protocol() -> None:
    assert instructions_for_protocol("v1", "v1") == "v1"
    assert instructions_for_protocol("v2", "v1") == "v2"
    assert instructions_for_protocol("v1", "v2") == "v3"
    assert instructions_for_protocol("prompts/actor_instructions_v2.txt", "v2") == "v3"
    assert instructions_for_protocol("v3", "v1") == "v2"


def _answer(doc: dict[str, Any], limits: ActionLimits) -> Accepted | Invalid:
    outcome = parse_response(
        json.dumps(doc).encode(), expected_request_id=OBSERVATION["request_id"], limits=limits
    )
    assert isinstance(outcome, Accepted | Invalid), outcome
    return outcome


def test_a_v2_response_is_held_to_the_published_dimension_bounds_and_version() -> None:
    spec = {**SPEC, "low": -2, "high": 2}
    limits = _limits(spec)
    act = {"schema": "mailroom.response/v2", "request_id": OBSERVATION["request_id"]}
    assert isinstance(
        _answer({**act, "decision": "act", "actions": [[2, -2, 0, 1.5]]}, limits), Accepted
    )
    cases = [
        ({**act, "decision": "act", "actions": [[0.0] * 7]}, InvalidReason.WRONG_VECTOR_LENGTH),
        ({**act, "decision": "act", "actions": [[0, 0, 2.5, 0]]}, InvalidReason.OUT_OF_BOUNDS),
        ({**act, "decision": "act", "actions": [[0, 0, "1", 0]]}, InvalidReason.NON_NUMERIC_VALUE),
        (
            {**act, "schema": "mailroom.response/v1", "decision": "stop"},
            InvalidReason.WRONG_SCHEMA_VERSION,
        ),
    ]
    for doc, reason in cases:
        outcome = _answer(doc, limits)
        assert isinstance(outcome, Invalid) and outcome.reason == reason, (doc, outcome)
    bounds = _answer(cases[1][0], limits)
    assert isinstance(bounds, Invalid)
    assert bounds.issues[0].message == "actions[0][2] is outside [-2, 2]"
    # And a v2 response answering a v1 observation is the wrong version there.
    v1 = _answer({**act, "decision": "stop"}, ActionLimits(max_chunk=5))
    assert isinstance(v1, Invalid) and v1.reason == InvalidReason.WRONG_SCHEMA_VERSION


ENDPOINT = Endpoint(Path("/mailbox") / secrets.token_hex(16))


@pytest.mark.parametrize("proprio", [False, True])
@pytest.mark.parametrize("rejected", [False, True])
def test_the_v2_document_is_the_models_and_meets_the_frozen_schema(
    proprio: bool, rejected: bool
) -> None:
    published = ActionSpecV2.model_validate(SPEC)
    feedback = (
        bounded_feedback(2, [Issue("out_of_bounds", "actions[0][1] is outside [-1, 1]")])
        if rejected
        else None
    )
    delivery = Delivery(
        sequence=3,
        request_id=secrets.token_hex(16),
        instruction="stack the cube",
        capture=Capture(
            images={"overhead": np.zeros((64, 64, 3), dtype=np.uint8)},
            joint_pos=(0.1,) * 7 if proprio else None,
            gripper_qpos=(0.04, -0.04) if proprio else None,
        ),
        action_spec=published,
        counters=PublicCounters(
            policy_calls=2,
            max_policy_calls=None,
            executed_controls=10,
            max_controls=None,
            rejected_responses=int(rejected),
        ),
        feedback=feedback,
    )
    document = observation_document(delivery, ENDPOINT)
    model = build_observation(delivery, ENDPOINT)
    assert isinstance(model, ObservationV2)
    assert document == to_document(model)
    assert document["schema"] == "mailroom.observation/v2"
    assert schema_errors("mailroom.observation/v2", document) == []
    assert from_json(ObservationV2, document_bytes(document)) == model
    if proprio:
        assert document["proprio"] == {"joint_pos": [0.1] * 7, "gripper_qpos": [0.04, -0.04]}


def test_the_v2_models_refuse_what_the_schema_cannot_say() -> None:
    with pytest.raises(ValueError, match="layout"):
        ActionSpecV2.model_validate({**SPEC, "dimension": 3})
    with pytest.raises(ValueError, match="below"):
        ActionSpecV2.model_validate({**SPEC, "low": 1, "high": 1})
