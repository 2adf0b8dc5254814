"""Documents of each frozen schema that has a pydantic mirror, valid and invalid, made by
mutating one base document per kind (observation, response, closed, diagnostics, audit
verdict): `EXAMPLES` (kind, name, document, whether it is valid) and `KINDS` (kind ->
schema and model). The responses include the contract suite's (tests/support/
mailbox_cases.py) that decode to a JSON value."""

from __future__ import annotations

from document_mutations import DELETE, Doc, all_of, mutated, set_at
from mailbox_cases import CASES, DROP, REQUEST_ID, VECTOR, response, stop
from mailroom.mailbox.messages import Closed, Observation, Response
from mailroom.mailbox.parser import decode_document
from mailroom.orchestrator.records.audit_verdict import AUDIT_SCHEMA, AuditVerdict
from mailroom.orchestrator.replay.diagnostics import AttemptDiagnostics
from pydantic import BaseModel

# --- observation -----------------------------------------------------------------

OBSERVATION: Doc = {
    "schema": "mailroom.observation/v1",
    "request_id": REQUEST_ID,
    "sequence": 3,
    "response_file": "inbox/resp-3.json",
    "instruction": "an instruction",
    "images": {
        "agentview": {
            "file": "outbox/obs-3-agentview.png",
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
        "layout": ["dx", "dy", "dz", "droll", "dpitch", "dyaw", "gripper"],
        "controller": "OSC_POSE",
        "control_hz": 20,
        "replan_interval": 5,
        "max_chunk": 8,
    },
    "counters": {
        "policy_calls": 2,
        "max_policy_calls": None,
        "executed_controls": 10,
        "max_controls": 1000,
        "rejected_responses": 1,
    },
    "feedback": None,
    "history": "current_observation_only",
}
ISSUE = {"code": "out_of_bounds", "message": "actions[0][2] is outside [-1, 1]"}
FEEDBACK: Doc = {"rejected_sequence": 2, "issues": [ISSUE], "more_issues": 0}
PROPRIO = {"joint_pos": [0.1, -0.2, 0, 1, 2, 3, 4], "gripper_qpos": [0.04, -0.04]}

OBSERVATION_VALID = [
    ("base", OBSERVATION),
    *mutated(
        OBSERVATION,
        {
            "with_feedback": set_at("feedback", FEEDBACK),
            "with_proprio": set_at("proprio", PROPRIO),
            "fractional_control_hz": set_at("action_spec.control_hz", 12.5),
            "limited_calls": set_at("counters.max_policy_calls", 200),
            "two_cameras": set_at(
                "images.robot0_eye_in_hand",
                {"file": "outbox/b.png", "width": 1, "height": 1, "encoding": "png/rgb8"},
            ),
            "five_issues": set_at("feedback", {**FEEDBACK, "issues": [ISSUE] * 5}),
            "action_spec_constants_as_floats": set_at("action_spec.dimension", 7.0),
        },
    ),
]
OBSERVATION_INVALID = mutated(
    OBSERVATION,
    {f"missing_{key}": set_at(key, DELETE) for key in OBSERVATION}
    | {
        "extra_field": set_at("reward", 1.0),
        "alias_spelt_as_attribute": lambda d: d.update(schema_=d.pop("schema")),
        "wrong_schema": set_at("schema", "mailroom.observation/v2"),
        "request_id_upper": set_at("request_id", REQUEST_ID.upper()),
        "request_id_short": set_at("request_id", REQUEST_ID[:-1]),
        "request_id_newline": set_at("request_id", REQUEST_ID + "\n"),
        "sequence_zero": set_at("sequence", 0),
        "sequence_float": set_at("sequence", 3.0),
        "sequence_bool": set_at("sequence", True),
        "sequence_string": set_at("sequence", "3"),
        "response_file_zero": set_at("response_file", "inbox/resp-0.json"),
        "response_file_outbox": set_at("response_file", "outbox/resp-3.json"),
        "response_file_newline": set_at("response_file", "inbox/resp-3.json\n"),
        "instruction_empty": set_at("instruction", ""),
        "instruction_too_long": set_at("instruction", "x" * 2001),
        "no_images": set_at("images", {}),
        "image_missing_encoding": set_at("images.agentview.encoding", DELETE),
        "image_other_encoding": set_at("images.agentview.encoding", "png/rgba8"),
        "image_zero_width": set_at("images.agentview.width", 0),
        "image_path_escape": set_at("images.agentview.file", "outbox/../x.png"),
        "image_extra": set_at("images.agentview.depth", 8),
        "proprio_six_joints": set_at("proprio", {**PROPRIO, "joint_pos": [0] * 6}),
        "proprio_string": set_at("proprio", {**PROPRIO, "gripper_qpos": ["0", 0]}),
        "proprio_missing_gripper": set_at("proprio", {"joint_pos": [0] * 7}),
        "proprio_extra": set_at("proprio", {**PROPRIO, "eef_pos": [0, 0, 0]}),
        "dimension_six": set_at("action_spec.dimension", 6),
        "low_minus_two": set_at("action_spec.low", -2),
        "layout_six": set_at("action_spec.layout", ["a"] * 6),
        "controller_other": set_at("action_spec.controller", "JOINT_VELOCITY"),
        "control_hz_zero": set_at("action_spec.control_hz", 0),
        "replan_zero": set_at("action_spec.replan_interval", 0),
        "max_chunk_float": set_at("action_spec.max_chunk", 8.0),
        "action_spec_missing_key": set_at("action_spec.controller", DELETE),
        "action_spec_extra": set_at("action_spec.horizon", 520),
        "negative_counter": set_at("counters.policy_calls", -1),
        "zero_call_budget": set_at("counters.max_policy_calls", 0),
        "counters_missing_key": set_at("counters.rejected_responses", DELETE),
        "feedback_no_issues": set_at("feedback", {**FEEDBACK, "issues": []}),
        "feedback_six_issues": set_at("feedback", {**FEEDBACK, "issues": [ISSUE] * 6}),
        "feedback_code_upper": set_at(
            "feedback", {**FEEDBACK, "issues": [{"code": "Bad", "message": "m"}]}
        ),
        "feedback_code_digit": set_at(
            "feedback", {**FEEDBACK, "issues": [{"code": "not_utf8", "message": "m"}]}
        ),
        "feedback_long_message": set_at(
            "feedback", {**FEEDBACK, "issues": [{"code": "x", "message": "m" * 201}]}
        ),
        "feedback_negative_more": set_at("feedback", {**FEEDBACK, "more_issues": -1}),
        "feedback_sequence_zero": set_at("feedback", {**FEEDBACK, "rejected_sequence": 0}),
        "history_other": set_at("history", "full"),
        "not_an_object": lambda d: d.clear(),
    },
)


# --- response --------------------------------------------------------------------


def _response_cases() -> tuple[list[tuple[str, object]], list[tuple[str, object]]]:
    """The contract suite's documents that decode to an object, plus a few of our own."""
    valid: list[tuple[str, object]] = [
        ("act", response()),
        ("stop", stop()),
        ("note", stop(note="n" * 280)),
        ("integers", response(actions=[[1, -1, 0, 0, 0, 0, 1]])),
        ("schema_cap", response(actions=[VECTOR] * 64)),
    ]
    invalid: list[tuple[str, object]] = [
        ("actions_null", response(actions=None)),
        ("note_null", stop(note=None)),
        ("stop_actions_null", stop(actions=None)),
        ("alias_spelt_as_attribute", {**stop(schema=DROP), "schema_": "mailroom.response/v1"}),
        ("request_id_newline", stop(request_id=REQUEST_ID + "\n")),
        ("over_the_schema_cap", response(actions=[VECTOR] * 65)),
        ("array", [stop()]),
    ]
    for case in CASES:
        if case.data is None:
            continue
        value = decode_document(case.data)
        if isinstance(value, dict):
            target = valid if case.expect[0] == "accepted" else invalid
            # A foreign request id and the run's chunk limit are the parser's, not the schema's.
            if case.name in ("wrong_request_id", "over_long_chunk"):
                target = valid
            target.append((case.name, value))
    return valid, invalid


RESPONSE_VALID, RESPONSE_INVALID = _response_cases()

# --- closed ----------------------------------------------------------------------

CLOSED: Doc = {"schema": "mailroom.closed/v1", "last_sequence": 4}
CLOSED_VALID = [("base", CLOSED), ("zero", {**CLOSED, "last_sequence": 0})]
CLOSED_INVALID = mutated(
    CLOSED,
    {
        "negative": set_at("last_sequence", -1),
        "float": set_at("last_sequence", 4.0),
        "string": set_at("last_sequence", "4"),
        "bool": set_at("last_sequence", True),
        "missing_sequence": set_at("last_sequence", DELETE),
        "missing_schema": set_at("schema", DELETE),
        "wrong_schema": set_at("schema", "mailroom.closed/v2"),
        "extra": set_at("outcome", "success"),
    },
)

# --- diagnostics -------------------------------------------------------------------

DIAGNOSTICS: Doc = {
    "schema": "mailroom.diagnostics/v1",
    "attempt_id": "libero_goal-t008-i00-o0-s7-a1",
    "label": "post-episode diagnostics: never a score",
    "replay_verdict": "reproduced",
    "controls_evaluated": 9,
    "predicates": [
        {"predicate": "on akita_black_bowl_1 plate_1", "first_held_control": 9, "held_at_end": True}
    ],
    "computed_at": "2026-12-01T18:00:00.000Z",
}
DIAGNOSTICS_VALID = [
    ("base", DIAGNOSTICS),
    (
        "never_held",
        mutated(DIAGNOSTICS, {"x": set_at("predicates.0.first_held_control", None)})[0][1],
    ),
    ("no_predicates", {**DIAGNOSTICS, "predicates": []}),
]
DIAGNOSTICS_INVALID = mutated(
    DIAGNOSTICS,
    {
        "a_score_label": set_at("label", "success rate"),
        "not_replayable": set_at("replay_verdict", "not_replayable"),
        "negative_control": set_at("predicates.0.first_held_control", -1),
        "held_as_string": set_at("predicates.0.held_at_end", "yes"),
        "empty_predicate": set_at("predicates.0.predicate", ""),
        "extra_in_predicate": set_at("predicates.0.success", True),
        "missing_verdict": set_at("replay_verdict", DELETE),
        "extra": set_at("success_rate", 1.0),
        "not_a_date_time": set_at("computed_at", "today"),
    },
)

# --- audit verdict -------------------------------------------------------------------

LEAK: Doc = {
    "attempt_id": "libero_10-t000-i00-o0-s20260907-a1",
    "where": "scratch/notes.md",
    "identifier_kind": "suite",
    "excerpt": "this is libero_10",
    "source": "actor_written",
}
INFORMATION: Doc = {
    "attempt_id": "libero_10-t000-i00-o0-s20260907-a1",
    "where": "scratch/.claude.json",
    "kind": "date",
    "excerpt": '{"firstStartTime": "2026-12-02T10:10:10.000Z"}',
    "source": "actor_written",
}
UNVERIFIABLE: Doc = {"attempt_id": "a-1", "reason": "endpoint directory /tmp/x is gone"}
AUDIT: Doc = {
    "schema": AUDIT_SCHEMA,
    "run_id": "run-20261202T101010Z-abcd",
    "audited_at": "2026-12-02T18:00:00.000Z",
    "attempts_scanned": 2,
    "files_scanned": 20,
    "unverifiable": [],
    "leaks": [LEAK],
    "information": [INFORMATION],
    "clean": False,
}


def _clean(doc: Doc) -> None:
    doc["leaks"] = []
    doc["clean"] = True


def _clean_without_anything(doc: Doc) -> None:
    _clean(doc)
    doc["information"] = []


def _not_recorded(doc: Doc) -> None:
    """As a verdict upgraded from v1 holds it: no information, no leak's source."""
    doc["information"] = None
    for leak in doc["leaks"]:
        leak["source"] = None


AUDIT_VALID = [
    ("base", AUDIT),
    *mutated(
        AUDIT,
        {
            "clean_with_information": _clean,
            "clean_without_anything": _clean_without_anything,
            "unverifiable_only": lambda d: d.update(leaks=[], unverifiable=[UNVERIFIABLE]),
            "no_information": set_at("information", []),
            "benchmark_information": set_at("information.0.kind", "benchmark"),
            "handed_date": set_at(
                "leaks.0", {**LEAK, "identifier_kind": "date", "source": "handed"}
            ),
            "handed_benchmark": set_at(
                "leaks.0", {**LEAK, "identifier_kind": "benchmark", "source": "handed"}
            ),
            "endpoint_path": set_at("leaks.0", {**LEAK, "where": "endpoint", "source": "handed"}),
            "no_files": set_at("files_scanned", 0),
            "not_recorded": _not_recorded,
            # Before v2, what an actor wrote itself was judged like what it was handed.
            "not_recorded_date_leak": all_of(
                _not_recorded, set_at("leaks.0.identifier_kind", "date")
            ),
            "not_recorded_clean": all_of(_clean, set_at("information", None)),
        },
    ),
]
AUDIT_INVALID = mutated(
    AUDIT,
    {f"missing_{key}": set_at(key, DELETE) for key in AUDIT}
    | {
        "clean_with_leaks": set_at("clean", True),
        "not_clean_with_information_only": set_at("leaks", []),
        "actor_written_date_leak": set_at("leaks.0.identifier_kind", "date"),
        "actor_written_benchmark_leak": set_at("leaks.0.identifier_kind", "benchmark"),
        "leak_without_source": set_at("leaks.0.source", DELETE),
        "leak_source_other": set_at("leaks.0.source", "evaluator"),
        "leak_kind_other": set_at("leaks.0.identifier_kind", "weather"),
        "information_handed": set_at("information.0.source", "handed"),
        "information_without_source": set_at("information.0.source", DELETE),
        "information_of_a_suite": set_at("information.0.kind", "suite"),
        "not_recorded_source_missing": all_of(_not_recorded, set_at("leaks.0.source", DELETE)),
        "information_kind_as_identifier_kind": lambda d: d["information"][0].update(
            identifier_kind=d["information"][0].pop("kind")
        ),
        "information_extra": set_at("information.0.clean", True),
        "information_long_excerpt": set_at("information.0.excerpt", "x" * 201),
        "information_empty_where": set_at("information.0.where", ""),
        "leak_long_where": set_at("leaks.0.where", "x" * 1001),
        "leak_long_attempt": set_at("leaks.0.attempt_id", "a" * 301),
        "unverifiable_empty_reason": lambda d: d.update(
            unverifiable=[{**UNVERIFIABLE, "reason": ""}]
        ),
        "as_v1": set_at("schema", "mailroom.audit/v1"),
        "as_v2": set_at("schema", "mailroom.audit/v2"),
        "as_v4": set_at("schema", "mailroom.audit/v4"),
        "audited_at_not_a_date_time": set_at("audited_at", "yesterday"),
        "negative_files": set_at("files_scanned", -1),
        "float_attempts": set_at("attempts_scanned", 2.0),
        "empty_run_id": set_at("run_id", ""),
        "extra": set_at("verdict", "ok"),
    },
)


KINDS: dict[str, tuple[str, type[BaseModel]]] = {
    "observation": ("mailroom.observation/v1", Observation),
    "response": ("mailroom.response/v1", Response),
    "closed": ("mailroom.closed/v1", Closed),
    "diagnostics": ("mailroom.diagnostics/v1", AttemptDiagnostics),
    "audit": (AUDIT_SCHEMA, AuditVerdict),
}
EXAMPLES: list[tuple[str, str, object, bool]] = [
    (kind, name, doc, ok)
    for kind, valid, invalid in (
        ("observation", OBSERVATION_VALID, OBSERVATION_INVALID),
        ("response", RESPONSE_VALID, RESPONSE_INVALID),
        ("closed", CLOSED_VALID, CLOSED_INVALID),
        ("diagnostics", DIAGNOSTICS_VALID, DIAGNOSTICS_INVALID),
        ("audit", AUDIT_VALID, AUDIT_INVALID),
    )
    for examples, ok in ((valid, True), (invalid, False))
    for name, doc in examples
]
