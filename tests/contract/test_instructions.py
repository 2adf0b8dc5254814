"""The actor instructions: every example passes the frozen contract; only two placeholders."""

from __future__ import annotations

import json
import re
import secrets
from pathlib import Path
from typing import Any

import click
import numpy as np
import pytest
from instruction_examples import examples, examples_by_kind
from mailroom.mailbox.endpoint import create_endpoint
from mailroom.mailbox.feedback import MAX_FEEDBACK_ISSUES
from mailroom.mailbox.messages import (
    ActionSpec,
    Closed,
    Feedback,
    Observation,
    PublicCounters,
    from_json,
)
from mailroom.mailbox.parser import (
    MAX_DEPTH,
    MAX_NOTE_CHARS,
    MAX_RESPONSE_BYTES,
    Accepted,
    ActionLimits,
    InvalidReason,
    ProtocolReason,
    parse_response,
)
from mailroom.mailbox.publish import publish_all_to_outbox
from mailroom.mailbox.schemas import load_schema, make_validator, schema_errors
from mailroom.orchestrator.actors.confinement import ConfinementDeclaration, resolve_confinement
from mailroom.orchestrator.actors.instructions import (
    PLACEHOLDERS,
    render_instructions,
    template_fields,
    transport_host,
)
from mailroom.orchestrator.actors.process import OUTPUT_CAP_BYTES, scrubbed_environment
from mailroom.orchestrator.actors.profiles import INSTRUCTION_PROTOCOLS, actor_instructions_template
from mailroom.orchestrator.cli.launch import launch
from mailroom.orchestrator.episode.evidence import EpisodeEvidence
from mailroom.orchestrator.episode.settings import RunSettings
from mailroom.orchestrator.sim.base import Capture
from mailroom.orchestrator.transport.base import Delivery
from mailroom.orchestrator.transport.mailbox import MailboxTransport

TEMPLATE = actor_instructions_template()
FLAT = " ".join(TEMPLATE.split())


EXAMPLES = examples_by_kind(TEMPLATE, "mailroom.response/v1")
[OBSERVATION] = EXAMPLES["mailroom.observation/v1"]


def test_the_instructions_show_each_kind_of_document() -> None:
    assert set(EXAMPLES) == {
        "mailroom.observation/v1",
        "response-act",
        "response-stop",
        "feedback",
        "mailroom.closed/v1",
    }


def test_the_example_observation_is_a_valid_observation() -> None:
    assert schema_errors("mailroom.observation/v1", OBSERVATION) == []
    from_json(Observation, json.dumps(OBSERVATION))


@pytest.mark.parametrize("kind", ["response-act", "response-stop"])
def test_every_example_response_passes_the_frozen_parser(kind: str) -> None:
    spec = OBSERVATION["action_spec"]
    for doc in EXAMPLES[kind]:
        # As an actor would write it: the example's own bytes, answering the example.
        data = json.dumps(doc).encode("utf-8")
        outcome = parse_response(
            data,
            expected_request_id=OBSERVATION["request_id"],
            limits=ActionLimits(max_chunk=spec["max_chunk"]),
        )
        assert isinstance(outcome, Accepted), outcome
        assert outcome.decision == kind.removeprefix("response-")
        assert len(outcome.actions) <= spec["replan_interval"]


def test_the_example_feedback_and_closing_notice_are_valid() -> None:
    [feedback] = EXAMPLES["feedback"]
    from_json(Feedback, json.dumps(feedback))
    by_ref = {"$ref": f"{load_schema('mailroom.observation/v1')['$id']}#/$defs/feedback"}
    assert list(make_validator(by_ref).iter_errors(feedback)) == []
    [closed] = EXAMPLES["mailroom.closed/v1"]
    assert schema_errors("mailroom.closed/v1", closed) == []
    from_json(Closed, json.dumps(closed))


def test_the_stated_limits_are_the_parsers() -> None:
    flat = " ".join(TEMPLATE.split())
    for stated in (
        f"at most {MAX_DEPTH} levels of nesting",
        f"at most {MAX_RESPONSE_BYTES} bytes",
        f"at most {MAX_NOTE_CHARS} characters",
        f"At most {MAX_FEEDBACK_ISSUES} issues",
    ):
        assert stated in flat


def test_every_reason_code_is_explained() -> None:
    words = set(re.findall(r"[a-z_]+", TEMPLATE))
    assert {c.value for c in InvalidReason} <= words
    # wrong_file_name is check-response's alone: the loop ignores other names.
    assert {c.value for c in ProtocolReason} - {"wrong_file_name"} <= words


def test_only_the_host_and_endpoint_placeholders() -> None:
    assert template_fields(TEMPLATE) == PLACEHOLDERS == {"host", "endpoint"}


def test_rendering_substitutes_exactly_the_two_placeholders() -> None:
    endpoint, host = "/mb/0123456789abcdef0123456789abcdef", "box-7 (local file mailbox)"
    rendered = render_instructions(endpoint, host=host)
    expected = TEMPLATE.replace("{endpoint}", "\0E").replace("{host}", "\0H")
    assert rendered == expected.replace("\0E", endpoint).replace("\0H", host)
    assert "{endpoint}" not in rendered and "{host}" not in rendered
    # Everything else, the JSON examples' braces included, comes through untouched.
    assert examples(rendered) == examples(TEMPLATE)


def test_substituted_values_are_never_substituted_again() -> None:
    rendered = render_instructions("{host}", host="{endpoint}", template="a {endpoint} b {host}")
    assert rendered == "a {host} b {endpoint}"


def test_a_template_with_any_other_placeholder_is_refused() -> None:
    with pytest.raises(ValueError, match="suite"):
        render_instructions("/e", host="h", template="{endpoint} {suite}")


def test_the_instructions_name_nothing_of_the_case() -> None:
    text = TEMPLATE.lower()
    for word in ("libero", "suite", "seed", "bddl", "init_state", "robosuite", "task_index"):
        assert word not in text


# The facts an actor may rely on, pinned to the code that makes them true.


def test_the_stated_default_deadline_is_the_runs_and_the_clis() -> None:
    [option] = [p for p in launch.params if p.name == "response_timeout"]
    assert isinstance(option, click.Option)
    assert option.default == RunSettings().response_timeout_s
    assert f"By default you have {RunSettings().response_timeout_s:g} seconds" in FLAT


def test_the_stated_output_cap_is_the_actor_processs() -> None:
    assert OUTPUT_CAP_BYTES % (1 << 20) == 0
    assert f"the first {OUTPUT_CAP_BYTES >> 20} MiB of each" in FLAT


def test_the_stated_environment_is_the_actor_processs(tmp_path: Path) -> None:
    scratch = tmp_path / "endpoint" / "scratch"
    assert scrubbed_environment(scratch)["HOME"] == str(scratch)
    assert "Your working directory and HOME are scratch/" in FLAT
    # Confined unless the run says otherwise; no network unless the profile declares it.
    default = ConfinementDeclaration()
    settings = resolve_confinement(requested=None, spawns_actors=True, declaration=default)
    assert (settings.mode, settings.network) == ("sandbox", "none")
    assert "no network unless your method's profile declares it" in FLAT


def test_the_transport_host_is_a_local_file_mailbox() -> None:
    assert transport_host().endswith("(local file mailbox)")
    assert "the mailbox is local files only, with no network protocol" in FLAT


def test_an_observation_is_published_after_its_images(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """'Its images are published before it': the transport's order of publication."""
    published: list[list[str]] = []
    real = publish_all_to_outbox

    def recording(dirs: Any, items: Any, **kwargs: Any) -> None:
        published.append([name for name, _ in items])
        real(dirs, items, **kwargs)

    monkeypatch.setattr("mailroom.orchestrator.transport.mailbox.publish_all_to_outbox", recording)
    endpoint = create_endpoint(tmp_path / "mailbox")
    evidence = EpisodeEvidence(tmp_path / "private" / "episodes" / "a-1")
    transport = MailboxTransport(endpoint, evidence)
    image = np.zeros((8, 8, 3), dtype=np.uint8)
    spec = OBSERVATION["action_spec"]
    try:
        transport.deliver(
            Delivery(
                sequence=1,
                request_id=secrets.token_hex(16),
                instruction="an instruction",
                capture=Capture(
                    images={"agentview": image, "robot0_eye_in_hand": image},
                    joint_pos=None,
                    gripper_qpos=None,
                ),
                action_spec=ActionSpec(
                    layout=spec["layout"],
                    control_hz=spec["control_hz"],
                    replan_interval=spec["replan_interval"],
                    max_chunk=spec["max_chunk"],
                ),
                counters=PublicCounters(**OBSERVATION["counters"]),
                feedback=None,
            )
        )
    finally:
        transport.close(1)
        evidence.close()
    [observation] = published  # one batch, renamed in its order: the document last
    assert observation[-1] == "obs-1.json"
    assert set(observation[:-1]) == {"obs-1-agentview.png", "obs-1-robot0_eye_in_hand.png"}
    assert sorted(p.name for p in endpoint.outbox.glob("obs-1*")) == sorted(observation)
    assert "Its images are published before it" in FLAT


def _outside_actions(text: str) -> str:
    head, _, rest = text.partition("\nACTIONS\n")
    _, _, tail = rest.partition("\nTHE AXES IN THE IMAGES\n")
    return head + tail


@pytest.mark.parametrize(
    "version", sorted(v for v, p in INSTRUCTION_PROTOCOLS.items() if p == "v1")
)
def test_every_version_keeps_the_examples_and_all_but_the_actions_word_for_word(
    version: str,
) -> None:
    """v2 adds measured facts of the arm to ACTIONS only: every check of this module on
    v1's examples and contract lines holds for each version of protocol v1 (v3, of
    protocol v2, has its own: test_instructions_protocol_v2.py)."""
    text = actor_instructions_template(version)
    assert template_fields(text) == PLACEHOLDERS
    assert examples(text) == examples(TEMPLATE)
    assert _outside_actions(text) == _outside_actions(TEMPLATE)
    assert "\nTHE AXES IN THE IMAGES\n" in text and "\nACTIONS\n" in text
