"""Each frozen schema and its pydantic mirror give the same verdict on the same document.

The schema judges the decoded JSON value; the model judges the JSON text, as it would
arrive (`from_json`: strict, wire field names). Decoding rules that come before either
(UTF-8, no NaN literals, no duplicate keys, depth) are the parser's, tested elsewhere.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Callable
from typing import Any

import pytest
from mailroom.mailbox.messages import Closed, Observation, Response, from_json
from mailroom.mailbox.parser import decode_document
from mailroom.mailbox.schemas import schema_errors
from mailroom.orchestrator.audit.scan import AuditVerdict
from mailroom.orchestrator.episode.runner import settings_record
from mailroom.orchestrator.episode.settings import RunSettings
from mailroom.orchestrator.records.confinement import ConfinementRecord
from mailroom.orchestrator.records.result import (
    TOKEN_COUNTS,
    CaseRecord,
    Counters,
    DecisionUsage,
    Enforcement,
    EpisodeResult,
    Latency,
    ModelUsage,
    ProviderUsage,
    TypedError,
    Usage,
)
from mailroom.orchestrator.replay.diagnostics import AttemptDiagnostics
from pydantic import BaseModel, ValidationError
from test_mailbox_cases import CASES, DROP, REQUEST_ID, VECTOR, response, stop

Doc = dict[str, Any]
Mutation = Callable[[Doc], None]


def _verdicts(kind: str, model: type[BaseModel], doc: object) -> tuple[bool, bool]:
    schema_ok = schema_errors(kind, doc) == []
    try:
        from_json(model, json.dumps(doc))
        model_ok = True
    except ValidationError:
        model_ok = False
    return schema_ok, model_ok


def _set(path: str, value: object) -> Mutation:
    """Set a dotted path ('a.b.0'); a value of DELETE removes the key."""

    def mutate(doc: Doc) -> None:
        *parents, last = path.split(".")
        node: Any = doc
        for part in parents:
            node = node[int(part)] if isinstance(node, list) else node[part]
        if value is DELETE:
            del node[last]
        elif isinstance(node, list):
            node[int(last)] = value
        else:
            node[last] = value

    return mutate


DELETE = object()


def _mutated(base: Doc, mutations: dict[str, Mutation]) -> list[tuple[str, Doc]]:
    out = []
    for name, mutate in mutations.items():
        doc = copy.deepcopy(base)
        mutate(doc)
        out.append((name, doc))
    return out


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
    *_mutated(
        OBSERVATION,
        {
            "with_feedback": _set("feedback", FEEDBACK),
            "with_proprio": _set("proprio", PROPRIO),
            "fractional_control_hz": _set("action_spec.control_hz", 12.5),
            "limited_calls": _set("counters.max_policy_calls", 200),
            "two_cameras": _set(
                "images.robot0_eye_in_hand",
                {"file": "outbox/b.png", "width": 1, "height": 1, "encoding": "png/rgb8"},
            ),
            "five_issues": _set("feedback", {**FEEDBACK, "issues": [ISSUE] * 5}),
            "action_spec_constants_as_floats": _set("action_spec.dimension", 7.0),
        },
    ),
]
OBSERVATION_INVALID = _mutated(
    OBSERVATION,
    {f"missing_{key}": _set(key, DELETE) for key in OBSERVATION}
    | {
        "extra_field": _set("reward", 1.0),
        "alias_spelt_as_attribute": lambda d: d.update(schema_=d.pop("schema")),
        "wrong_schema": _set("schema", "mailroom.observation/v2"),
        "request_id_upper": _set("request_id", REQUEST_ID.upper()),
        "request_id_short": _set("request_id", REQUEST_ID[:-1]),
        "request_id_newline": _set("request_id", REQUEST_ID + "\n"),
        "sequence_zero": _set("sequence", 0),
        "sequence_float": _set("sequence", 3.0),
        "sequence_bool": _set("sequence", True),
        "sequence_string": _set("sequence", "3"),
        "response_file_zero": _set("response_file", "inbox/resp-0.json"),
        "response_file_outbox": _set("response_file", "outbox/resp-3.json"),
        "response_file_newline": _set("response_file", "inbox/resp-3.json\n"),
        "instruction_empty": _set("instruction", ""),
        "instruction_too_long": _set("instruction", "x" * 2001),
        "no_images": _set("images", {}),
        "image_missing_encoding": _set("images.agentview.encoding", DELETE),
        "image_other_encoding": _set("images.agentview.encoding", "png/rgba8"),
        "image_zero_width": _set("images.agentview.width", 0),
        "image_path_escape": _set("images.agentview.file", "outbox/../x.png"),
        "image_extra": _set("images.agentview.depth", 8),
        "proprio_six_joints": _set("proprio", {**PROPRIO, "joint_pos": [0] * 6}),
        "proprio_string": _set("proprio", {**PROPRIO, "gripper_qpos": ["0", 0]}),
        "proprio_missing_gripper": _set("proprio", {"joint_pos": [0] * 7}),
        "proprio_extra": _set("proprio", {**PROPRIO, "eef_pos": [0, 0, 0]}),
        "dimension_six": _set("action_spec.dimension", 6),
        "low_minus_two": _set("action_spec.low", -2),
        "layout_six": _set("action_spec.layout", ["a"] * 6),
        "controller_other": _set("action_spec.controller", "JOINT_VELOCITY"),
        "control_hz_zero": _set("action_spec.control_hz", 0),
        "replan_zero": _set("action_spec.replan_interval", 0),
        "max_chunk_float": _set("action_spec.max_chunk", 8.0),
        "action_spec_missing_key": _set("action_spec.controller", DELETE),
        "action_spec_extra": _set("action_spec.horizon", 520),
        "negative_counter": _set("counters.policy_calls", -1),
        "zero_call_budget": _set("counters.max_policy_calls", 0),
        "counters_missing_key": _set("counters.rejected_responses", DELETE),
        "feedback_no_issues": _set("feedback", {**FEEDBACK, "issues": []}),
        "feedback_six_issues": _set("feedback", {**FEEDBACK, "issues": [ISSUE] * 6}),
        "feedback_code_upper": _set(
            "feedback", {**FEEDBACK, "issues": [{"code": "Bad", "message": "m"}]}
        ),
        "feedback_code_digit": _set(
            "feedback", {**FEEDBACK, "issues": [{"code": "not_utf8", "message": "m"}]}
        ),
        "feedback_long_message": _set(
            "feedback", {**FEEDBACK, "issues": [{"code": "x", "message": "m" * 201}]}
        ),
        "feedback_negative_more": _set("feedback", {**FEEDBACK, "more_issues": -1}),
        "feedback_sequence_zero": _set("feedback", {**FEEDBACK, "rejected_sequence": 0}),
        "history_other": _set("history", "full"),
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
CLOSED_INVALID = _mutated(
    CLOSED,
    {
        "negative": _set("last_sequence", -1),
        "float": _set("last_sequence", 4.0),
        "string": _set("last_sequence", "4"),
        "bool": _set("last_sequence", True),
        "missing_sequence": _set("last_sequence", DELETE),
        "missing_schema": _set("schema", DELETE),
        "wrong_schema": _set("schema", "mailroom.closed/v2"),
        "extra": _set("outcome", "success"),
    },
)

# --- episode result --------------------------------------------------------------


def _result() -> Doc:
    sha = "ab" * 32
    return EpisodeResult(
        attempt_id="a-1",
        case_id="c-1",
        outcome="failure",
        termination="actor_stop",
        truncated=False,
        truncation=None,
        counters=Counters(policy_calls=3, action_decisions=2, stop_responses=1),
        latency=Latency(samples=3, median_ms=12.5, max_ms=40.0, total_ms=70.0),
        queue_delay=Latency.of([0.5]),
        processing=Latency.of([]),
        usage=Usage(),
        errors=[TypedError(kind="policy_error", code="out_of_bounds", message="m", policy_call=2)],
        case=CaseRecord(
            benchmark="b",
            suite="s",
            task_index=0,
            task_name="t",
            instruction="i",
            init_state_index=0,
            task_order_index=0,
            seed=7,
            bddl_sha256=sha,
            init_states_sha256=sha,
            state_sha256=sha,
        ),
        settings=settings_record(RunSettings(proprio=False), control_cap=1000),
        blinded=True,
        confinement=ConfinementRecord(mode="sandbox", network="none"),
        instructions_version="v2",
        simulator="parked",
        enforcement=Enforcement(memory="enforced", writable_space="kernel"),
        started_at="2026-09-07T12:00:00.000Z",
        finished_at="2026-09-07T12:01:00.000Z",
        wall_time_s=60.0,
    ).document()


RESULT = _result()
SONNET = "claude-sonnet-4-5"
# What the provider gateway metered: three requests forwarded (one a provider fault while
# the first observation was pending, two answered by the declared model), one refused.
METERED: Doc = ProviderUsage(
    source="gateway",
    provider="anthropic",
    provider_requests=3,
    refused_requests=1,
    failed_requests=1,
    other_requests=0,
    unmetered_requests=0,
    input_tokens=1200,
    output_tokens=300,
    cache_read_tokens=800,
    cache_write_tokens=100,
    server_tool_uses=1,
    cost=0.0123,
    cost_note=None,
    models=[
        ModelUsage(
            model=SONNET,
            requests=2,
            input_tokens=1200,
            output_tokens=300,
            cache_read_tokens=800,
            cache_write_tokens=100,
            server_tool_uses=1,
            cost=0.0123,
            cost_note=None,
        )
    ],
    declared_model=SONNET,
    model_verified=True,
    provider_time_ms=2500.5,
    decisions=[
        DecisionUsage(
            decision=0, requests=1, provider_time_ms=500.25, input_tokens=0, output_tokens=0
        ),
        DecisionUsage(
            decision=1, requests=2, provider_time_ms=2000.25, input_tokens=1200, output_tokens=300
        ),
    ],
).model_dump(mode="json")
UNPRICED = "an answer that named no model is not priced"


def _all(*mutations: Mutation) -> Mutation:
    """The mutations one after another."""

    def mutate(doc: Doc) -> None:
        for one in mutations:
            one(doc)

    return mutate


def _moved(path: str, delta: float) -> Mutation:
    """Add `delta` to the number at a dotted path."""

    def mutate(doc: Doc) -> None:
        *parents, last = path.split(".")
        node: Any = doc
        for part in parents:
            node = node[int(part)] if isinstance(node, list) else node[part]
        node[last] += delta

    return mutate


def _unpriced(note: str) -> Mutation:
    """The model's cost, and so the total, not priced, with `note` saying why."""
    return _all(
        _set("usage.models.0.cost", None),
        _set("usage.models.0.cost_note", note),
        _set("usage.cost", None),
        _set("usage.cost_note", note),
    )


def _metered(doc: Doc) -> None:
    doc["usage"] = copy.deepcopy(METERED)
    doc["confinement"] = {"mode": "sandbox", "network": "gateway"}


def _unknown_answer(doc: Doc) -> None:
    """A fourth request answered naming no model: unpriced, and not the declared model."""
    usage = doc["usage"]
    unknown = {
        "model": "unknown",
        "requests": 1,
        **dict.fromkeys(TOKEN_COUNTS, 0),
        "cost": None,
        "cost_note": UNPRICED,
    }
    usage["models"].append(unknown)
    usage["provider_requests"] += 1
    usage["unmetered_requests"] += 1
    usage["decisions"][1]["requests"] += 1
    usage.update(cost=None, cost_note=UNPRICED, model_verified=False)


def _nothing_forwarded(doc: Doc) -> None:
    usage = doc["usage"]
    for name in [
        "provider_requests",
        "failed_requests",
        "input_tokens",
        "output_tokens",
        "cache_read_tokens",
        "cache_write_tokens",
        "server_tool_uses",
    ]:
        usage[name] = 0
    usage.update(
        refused_requests=2,
        cost=0.0,
        models=[],
        decisions=[],
        provider_time_ms=0.0,
        model_verified=None,
    )


RESULT_METERED = _mutated(RESULT, {"metered": _metered})[0][1]
RESULT_VALID = [
    ("base", RESULT),
    ("metered", RESULT_METERED),
    *_mutated(
        RESULT_METERED,
        {
            "metered_unknown_answer": _unknown_answer,
            "metered_nothing_forwarded": _nothing_forwarded,
            "metered_no_declared_model": lambda d: d["usage"].update(
                declared_model=None, model_verified=None
            ),
            "metered_other_model": _all(
                _set("usage.models.0.model", "claude-opus-4-1"),
                _set("usage.model_verified", False),
            ),
            "metered_openai": _set("usage.provider", "openai_responses"),
            "provider_budget_spent": _all(
                _set("truncated", True),
                _set("truncation", "provider_budget"),
                _set("termination", None),
                _set("outcome", "failure"),
            ),
            "metered_unpriced": _unpriced("not in the price table"),
            "metered_integer_time": _all(
                _set("usage.provider_time_ms", 2500),
                _set("usage.decisions.0.provider_time_ms", 500),
                _set("usage.decisions.1.provider_time_ms", 2000),
            ),
            # Times rounded to the microsecond at each addition still add up.
            "metered_rounded_time": _set("usage.provider_time_ms", 2500.501),
            "metered_unconfined": _set("confinement", {"mode": "none", "network": "host"}),
            "metered_no_network": _set("confinement.network", "none"),
            "metered_long_note": _unpriced("n" * 500),
        },
    ),
    *_mutated(
        RESULT,
        {
            "error_outcome": _set("outcome", "error"),
            "no_errors": _set("errors", []),
            "integer_wall_time": _set("wall_time_s", 60),
            "first_success": _set("counters.first_success_control", 12),
            "unconfined": _set("confinement", {"mode": "none", "network": "host"}),
            "external": _set("confinement", {"mode": "external", "network": None}),
            "instructions_v1": _set("instructions_version", "v1"),
            "instructions_v12": _set("instructions_version", "v12"),
            "dedicated": _set("simulator", "dedicated"),
            "never_started": _set("simulator", "none"),
            "memory_not_enforced": _set("enforcement.memory", "not enforced"),
            "writable_space_sampled": _set("enforcement.writable_space", "sampled"),
            "nothing_enforced": _set(
                "enforcement", {"memory": "not enforced", "writable_space": "sampled"}
            ),
            "gateway_unmetered": _set("confinement.network", "gateway"),
        },
    ),
]
RESULT_INVALID = _mutated(
    RESULT,
    {
        "outcome_other": _set("outcome", "maybe"),
        "termination_other": _set("termination", "crashed"),
        "negative_calls": _set("counters.policy_calls", -1),
        "float_calls": _set("counters.policy_calls", 3.0),
        "string_calls": _set("counters.policy_calls", "3"),
        "error_code_upper": _set("errors.0.code", "Bad"),
        "error_code_newline": _set("errors.0.code", "out_of_bounds\n"),
        "error_kind_other": _set("errors.0.kind", "oops"),
        "extra_field": _set("seed", 7),
        "short_sha": _set("case.bddl_sha256", "ab"),
        "handling_other": _set("settings.invalid_action_handling", "clip"),
        "truncated_string": _set("truncated", "yes"),
        "negative_wall_time": _set("wall_time_s", -1),
        "missing_attempt": _set("attempt_id", DELETE),
        "usage_cost_zero": _set("usage.cost", 0),
        "first_success_zero": _set("counters.first_success_control", 0),
        "no_confinement": _set("confinement", DELETE),
        "null_confinement": _set("confinement", None),
        "confinement_other": _set("confinement.mode", "jail"),
        "network_other": _set("confinement.network", "lan"),
        "confinement_extra": _set("confinement.uid", 7),
        "as_v1": _set("schema", "mailroom.episode_result/v1"),
        "as_v2": _set("schema", "mailroom.episode_result/v2"),
        "as_v3": _set("schema", "mailroom.episode_result/v3"),
        "as_v4": _set("schema", "mailroom.episode_result/v4"),
        "as_v5": _set("schema", "mailroom.episode_result/v5"),
        "no_enforcement": _set("enforcement", DELETE),
        "null_enforcement": _set("enforcement", None),
        "enforcement_empty": _set("enforcement", {}),
        "no_memory": _set("enforcement.memory", DELETE),
        "no_writable_space": _set("enforcement.writable_space", DELETE),
        "memory_bool": _set("enforcement.memory", True),
        "memory_not_enforced_underscore": _set("enforcement.memory", "not_enforced"),
        "memory_upper": _set("enforcement.memory", "Enforced"),
        "memory_null": _set("enforcement.memory", None),
        "writable_space_other": _set("enforcement.writable_space", "enforced"),
        "writable_space_null": _set("enforcement.writable_space", None),
        "enforcement_extra": _set("enforcement.memory_reason", "no cgroup"),
        "enforcement_string": _set("enforcement", "enforced"),
        "no_simulator": _set("simulator", DELETE),
        "null_simulator": _set("simulator", None),
        "simulator_other": _set("simulator", "shared"),
        "simulator_upper": _set("simulator", "Parked"),
        "simulator_bool": _set("simulator", True),
        "no_instructions_version": _set("instructions_version", DELETE),
        "null_instructions_version": _set("instructions_version", None),
        "instructions_unversioned": _set("instructions_version", "2"),
        "instructions_v0": _set("instructions_version", "v0"),
        "instructions_v02": _set("instructions_version", "v02"),
        "instructions_upper": _set("instructions_version", "V2"),
        "instructions_newline": _set("instructions_version", "v2\n"),
        "instructions_file": _set("instructions_version", "prompts/actor_instructions_v2.txt"),
        "instructions_number": _set("instructions_version", 2),
        "no_queue_delay": _set("queue_delay", DELETE),
        "null_queue_delay": _set("queue_delay", None),
        "no_processing": _set("processing", DELETE),
        "negative_queue_delay": _set("queue_delay.total_ms", -1.0),
        "queue_delay_extra": _set("queue_delay.p95_ms", 1.0),
        "unmetered_source_gateway": _set("usage.source", "gateway"),
        "unmetered_with_requests": _set("usage.provider_requests", 3),
        "usage_source_other": _set("usage.source", "proxy"),
        "network_gateway_upper": _set("confinement.network", "Gateway"),
    },
)
# Metered usage that the schema and the model both refuse.
RESULT_METERED_INVALID = _mutated(
    RESULT_METERED,
    {
        "metered_as_v6": _set("schema", "mailroom.episode_result/v6"),
        "metered_external": _set("confinement", {"mode": "external", "network": None}),
        "metered_source_other": _set("usage.source", "proxy"),
        "metered_no_source": _set("usage.source", DELETE),
        "metered_provider_other": _set("usage.provider", "openai"),
        "metered_provider_null": _set("usage.provider", None),
        "metered_extra": _set("usage.total_tokens", 1500),
        "metered_model_extra": _set("usage.models.0.total_tokens", 1500),
        "metered_decision_extra": _set("usage.decisions.0.cache_read_tokens", 0),
        "metered_no_decisions": _set("usage.decisions", DELETE),
        "metered_no_models": _set("usage.models", DELETE),
        "metered_no_refused": _set("usage.refused_requests", DELETE),
        "metered_negative_refused": _set("usage.refused_requests", -1),
        "metered_float_requests": _set("usage.provider_requests", 3.0),
        "metered_string_tokens": _set("usage.input_tokens", "1200"),
        "metered_null_tokens": _set("usage.output_tokens", None),
        "metered_negative_cost": _set("usage.cost", -0.01),
        "metered_cost_without_note": _set("usage.models.0.cost", None),
        "metered_cost_and_note": _set("usage.cost_note", "estimated"),
        "metered_empty_note": _unpriced(""),
        "metered_note_too_long": _unpriced("n" * 501),
        "metered_model_empty_name": _set("usage.models.0.model", ""),
        "metered_model_name_too_long": _set("usage.models.0.model", "m" * 201),
        "metered_model_zero_requests": _set("usage.models.0.requests", 0),
        "metered_decision_zero_requests": _set("usage.decisions.0.requests", 0),
        "metered_decision_negative": _set("usage.decisions.0.decision", -1),
        "metered_negative_time": _set("usage.provider_time_ms", -1.0),
        "metered_verified_null": _set("usage.model_verified", None),
        "metered_verified_string": _set("usage.model_verified", "yes"),
        "metered_verified_without_declared": _set("usage.declared_model", None),
        "metered_declared_empty": _set("usage.declared_model", ""),
        "metered_verified_without_answers": _all(
            _nothing_forwarded, _set("usage.model_verified", True)
        ),
        "metered_models_not_a_list": _set("usage.models", {}),
        "metered_usage_null": _set("usage", None),
    },
)


def _v5(doc: Doc) -> None:
    doc["schema"] = "mailroom.episode_result/v5"
    del doc["enforcement"]


def _v4(doc: Doc) -> None:
    _v5(doc)
    doc["schema"] = "mailroom.episode_result/v4"
    del doc["simulator"]


def _v3(doc: Doc) -> None:
    _v4(doc)
    doc["schema"] = "mailroom.episode_result/v3"
    del doc["instructions_version"]


def _v2(doc: Doc) -> None:
    _v3(doc)
    doc["schema"] = "mailroom.episode_result/v2"
    del doc["queue_delay"]
    del doc["processing"]


def _v1(doc: Doc) -> None:
    _v2(doc)
    doc["schema"] = "mailroom.episode_result/v1"
    del doc["confinement"]


# Results written before the provider gateway: the same model reads them; nothing in
# them was metered, and no actor's network was the gateway.
RESULT_V6 = {**RESULT, "schema": "mailroom.episode_result/v6"}
RESULT_V6_VALID = [
    ("base", RESULT_V6),
    *_mutated(
        RESULT_V6,
        {
            "unconfined": _set("confinement", {"mode": "none", "network": "host"}),
            "external": _set("confinement", {"mode": "external", "network": None}),
        },
    ),
]
RESULT_V6_INVALID = _mutated(
    RESULT_V6,
    {
        "metered": _set("usage", METERED),
        "metered_unconfined": _all(
            _set("usage", METERED), _set("confinement", {"mode": "none", "network": "host"})
        ),
        "gateway_network": _set("confinement.network", "gateway"),
        "provider_budget": _all(
            _set("truncated", True),
            _set("truncation", "provider_budget"),
            _set("termination", None),
            _set("outcome", "failure"),
        ),
        "as_v5": _set("schema", "mailroom.episode_result/v5"),
        "no_enforcement": _set("enforcement", DELETE),
    },
)


# Results written before enforcement was recorded: the same model reads them.
RESULT_V5 = _mutated(RESULT, {"v5": _v5})[0][1]
RESULT_V5_VALID = [
    ("base", RESULT_V5),
    *_mutated(RESULT_V5, {"never_started": _set("simulator", "none")}),
]
RESULT_V5_INVALID = _mutated(
    RESULT_V5,
    {
        "with_enforcement": _set("enforcement", RESULT["enforcement"]),
        "null_enforcement": _set("enforcement", None),
        "as_v6": _set("schema", "mailroom.episode_result/v6"),
        "as_v4": _set("schema", "mailroom.episode_result/v4"),
        "no_simulator": _set("simulator", DELETE),
        "metered": _set("usage", METERED),
        "gateway_network": _set("confinement.network", "gateway"),
    },
)


# Results written before the simulator's holding was recorded: the same model reads them.
RESULT_V4 = _mutated(RESULT, {"v4": _v4})[0][1]
RESULT_V4_VALID = [("base", RESULT_V4)]
RESULT_V4_INVALID = _mutated(
    RESULT_V4,
    {
        "with_simulator": _set("simulator", "parked"),
        "null_simulator": _set("simulator", None),
        "with_enforcement": _set("enforcement", RESULT["enforcement"]),
        "as_v5": _set("schema", "mailroom.episode_result/v5"),
        "no_instructions_version": _set("instructions_version", DELETE),
    },
)


# Results written before the instructions version was recorded: the same model reads them.
RESULT_V3 = _mutated(RESULT, {"v3": _v3})[0][1]
RESULT_V3_VALID = [("base", RESULT_V3)]
RESULT_V3_INVALID = _mutated(
    RESULT_V3,
    {
        "with_instructions_version": _set("instructions_version", "v1"),
        "null_instructions_version": _set("instructions_version", None),
        "with_simulator": _set("simulator", "dedicated"),
        "as_v4": _set("schema", "mailroom.episode_result/v4"),
        "as_v2": _set("schema", "mailroom.episode_result/v2"),
        "no_queue_delay": _set("queue_delay", DELETE),
    },
)


# Results written before the queueing split existed: the same model reads them.
RESULT_V2 = _mutated(RESULT, {"v2": _v2})[0][1]
RESULT_V2_VALID = [("base", RESULT_V2)]
RESULT_V2_INVALID = _mutated(
    RESULT_V2,
    {
        "with_queue_delay": _set("queue_delay", RESULT["queue_delay"]),
        "with_instructions_version": _set("instructions_version", "v1"),
        "as_v3": _set("schema", "mailroom.episode_result/v3"),
        "no_confinement": _set("confinement", DELETE),
        "gateway_network": _set("confinement.network", "gateway"),
    },
)


# Results written before confinement existed: the same model reads them.
RESULT_V1 = _mutated(RESULT, {"v1": _v1})[0][1]
RESULT_V1_VALID = [("base", RESULT_V1)]
RESULT_V1_INVALID = _mutated(
    RESULT_V1,
    {
        "with_confinement": _set("confinement", {"mode": "sandbox", "network": "none"}),
        "as_v2": _set("schema", "mailroom.episode_result/v2"),
        "with_queue_delay": _set("queue_delay", RESULT["queue_delay"]),
        "with_instructions_version": _set("instructions_version", "v1"),
        "extra_field": _set("seed", 7),
    },
)
# Where orchestrator/records/result.py does not mirror the frozen schema yet (see the reasons).
RESULT_WIRE_CASES = _mutated(
    RESULT,
    {
        "missing_schema": _set("schema", DELETE),
        "missing_counter": _set("counters.policy_calls", DELETE),
        "missing_usage_source": _set("usage.source", DELETE),
        "started_at_not_a_date_time": _set("started_at", "yesterday"),
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
        _mutated(DIAGNOSTICS, {"x": _set("predicates.0.first_held_control", None)})[0][1],
    ),
    ("no_predicates", {**DIAGNOSTICS, "predicates": []}),
]
DIAGNOSTICS_INVALID = _mutated(
    DIAGNOSTICS,
    {
        "a_score_label": _set("label", "success rate"),
        "not_replayable": _set("replay_verdict", "not_replayable"),
        "negative_control": _set("predicates.0.first_held_control", -1),
        "held_as_string": _set("predicates.0.held_at_end", "yes"),
        "empty_predicate": _set("predicates.0.predicate", ""),
        "extra_in_predicate": _set("predicates.0.success", True),
        "missing_verdict": _set("replay_verdict", DELETE),
        "extra": _set("success_rate", 1.0),
        "not_a_date_time": _set("computed_at", "today"),
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
    "schema": "mailroom.audit/v2",
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


AUDIT_VALID = [
    ("base", AUDIT),
    *_mutated(
        AUDIT,
        {
            "clean_with_information": _clean,
            "clean_without_anything": _clean_without_anything,
            "unverifiable_only": lambda d: d.update(leaks=[], unverifiable=[UNVERIFIABLE]),
            "no_information": _set("information", []),
            "benchmark_information": _set("information.0.kind", "benchmark"),
            "handed_date": _set("leaks.0", {**LEAK, "identifier_kind": "date", "source": "handed"}),
            "handed_benchmark": _set(
                "leaks.0", {**LEAK, "identifier_kind": "benchmark", "source": "handed"}
            ),
            "endpoint_path": _set("leaks.0", {**LEAK, "where": "endpoint", "source": "handed"}),
            "no_files": _set("files_scanned", 0),
        },
    ),
]
AUDIT_INVALID = _mutated(
    AUDIT,
    {f"missing_{key}": _set(key, DELETE) for key in AUDIT}
    | {
        "clean_with_leaks": _set("clean", True),
        "not_clean_with_information_only": _set("leaks", []),
        "actor_written_date_leak": _set("leaks.0.identifier_kind", "date"),
        "actor_written_benchmark_leak": _set("leaks.0.identifier_kind", "benchmark"),
        "leak_without_source": _set("leaks.0.source", DELETE),
        "leak_source_null": _set("leaks.0.source", None),
        "leak_source_other": _set("leaks.0.source", "evaluator"),
        "leak_kind_other": _set("leaks.0.identifier_kind", "weather"),
        "information_handed": _set("information.0.source", "handed"),
        "information_without_source": _set("information.0.source", DELETE),
        "information_of_a_suite": _set("information.0.kind", "suite"),
        "information_null": _set("information", None),
        "information_kind_as_identifier_kind": lambda d: d["information"][0].update(
            identifier_kind=d["information"][0].pop("kind")
        ),
        "information_extra": _set("information.0.clean", True),
        "information_long_excerpt": _set("information.0.excerpt", "x" * 201),
        "information_empty_where": _set("information.0.where", ""),
        "leak_long_where": _set("leaks.0.where", "x" * 1001),
        "leak_long_attempt": _set("leaks.0.attempt_id", "a" * 301),
        "unverifiable_empty_reason": lambda d: d.update(
            unverifiable=[{**UNVERIFIABLE, "reason": ""}]
        ),
        "as_v1": _set("schema", "mailroom.audit/v1"),
        "as_v3": _set("schema", "mailroom.audit/v3"),
        "audited_at_not_a_date_time": _set("audited_at", "yesterday"),
        "negative_files": _set("files_scanned", -1),
        "float_attempts": _set("attempts_scanned", 2.0),
        "empty_run_id": _set("run_id", ""),
        "extra": _set("verdict", "ok"),
    },
)


def _audit_v1(doc: Doc) -> None:
    doc["schema"] = "mailroom.audit/v1"
    del doc["information"]
    for leak in doc["leaks"]:
        del leak["source"]


# Verdicts of audits before v2 (no information, a leak without its source): still read.
AUDIT_V1 = _mutated(AUDIT, {"v1": _audit_v1})[0][1]
AUDIT_V1_VALID = [
    ("base", AUDIT_V1),
    *_mutated(
        AUDIT_V1,
        {
            "clean": _clean,
            "unverifiable_only": lambda d: d.update(leaks=[], unverifiable=[UNVERIFIABLE]),
            # Before v2, what an actor wrote itself was judged like what it was handed.
            "actor_written_date": _set("leaks.0.identifier_kind", "date"),
        },
    ),
]
AUDIT_V1_INVALID = _mutated(
    AUDIT_V1,
    {
        "with_information": _set("information", []),
        "with_information_null": _set("information", None),
        "leak_with_source": _set("leaks.0.source", "actor_written"),
        "leak_with_source_null": _set("leaks.0.source", None),
        "as_v2": _set("schema", "mailroom.audit/v2"),
        "clean_with_leaks": _set("clean", True),
        "audited_at_not_a_date_time": _set("audited_at", "yesterday"),
        "missing_leaks": _set("leaks", DELETE),
    },
)

KINDS: dict[str, tuple[str, type[BaseModel]]] = {
    "observation": ("mailroom.observation/v1", Observation),
    "response": ("mailroom.response/v1", Response),
    "closed": ("mailroom.closed/v1", Closed),
    "result": ("mailroom.episode_result/v7", EpisodeResult),
    "result_v6": ("mailroom.episode_result/v6", EpisodeResult),
    "result_v5": ("mailroom.episode_result/v5", EpisodeResult),
    "result_v4": ("mailroom.episode_result/v4", EpisodeResult),
    "result_v3": ("mailroom.episode_result/v3", EpisodeResult),
    "result_v2": ("mailroom.episode_result/v2", EpisodeResult),
    "result_v1": ("mailroom.episode_result/v1", EpisodeResult),
    "diagnostics": ("mailroom.diagnostics/v1", AttemptDiagnostics),
    "audit": ("mailroom.audit/v2", AuditVerdict),
    "audit_v1": ("mailroom.audit/v1", AuditVerdict),
}
EXAMPLES: list[tuple[str, str, object, bool]] = [
    (kind, name, doc, ok)
    for kind, valid, invalid in (
        ("observation", OBSERVATION_VALID, OBSERVATION_INVALID),
        ("response", RESPONSE_VALID, RESPONSE_INVALID),
        ("closed", CLOSED_VALID, CLOSED_INVALID),
        ("result", RESULT_VALID, RESULT_INVALID + RESULT_METERED_INVALID),
        ("result_v6", RESULT_V6_VALID, RESULT_V6_INVALID),
        ("result_v5", RESULT_V5_VALID, RESULT_V5_INVALID),
        ("result_v4", RESULT_V4_VALID, RESULT_V4_INVALID),
        ("result_v3", RESULT_V3_VALID, RESULT_V3_INVALID),
        ("result_v2", RESULT_V2_VALID, RESULT_V2_INVALID),
        ("result_v1", RESULT_V1_VALID, RESULT_V1_INVALID),
        ("diagnostics", DIAGNOSTICS_VALID, DIAGNOSTICS_INVALID),
        ("audit", AUDIT_VALID, AUDIT_INVALID),
        ("audit_v1", AUDIT_V1_VALID, AUDIT_V1_INVALID),
    )
    for examples, ok in ((valid, True), (invalid, False))
    for name, doc in examples
]


@pytest.mark.parametrize(
    ("kind", "name", "doc", "expected"),
    EXAMPLES,
    ids=[f"{k}-{'valid' if ok else 'invalid'}-{n}" for k, n, _, ok in EXAMPLES],
)
def test_schema_and_model_agree(kind: str, name: str, doc: object, expected: bool) -> None:
    schema_kind, model = KINDS[kind]
    assert _verdicts(schema_kind, model, doc) == (expected, expected)


def test_there_are_examples_of_every_kind_both_ways() -> None:
    for kind in KINDS:
        verdicts = {ok for k, _, _, ok in EXAMPLES if k == kind}
        assert verdicts == {True, False}, kind
    assert len(RESPONSE_INVALID) >= 30


@pytest.mark.parametrize(
    "doc",
    [RESULT_METERED, RESULT, RESULT_V6, RESULT_V5, RESULT_V4, RESULT_V3, RESULT_V2, RESULT_V1],
    ids=["v7_metered", "v7", "v6", "v5", "v4", "v3", "v2", "v1"],
)
def test_a_result_of_each_version_is_written_back_as_it_was_read(doc: Doc) -> None:
    """A version's later fields are never added on the way out, nor its own dropped."""
    assert from_json(EpisodeResult, json.dumps(doc)).document() == doc


@pytest.mark.parametrize("name", [n for n, _ in RESULT_WIRE_CASES])
def test_result_model_requires_what_the_schema_requires(name: str) -> None:
    """Defaults exist for building results in Python; on the wire every field is due."""
    doc = dict(RESULT_WIRE_CASES)[name]
    assert _verdicts("mailroom.episode_result/v7", EpisodeResult, doc) == (False, False)


# Metered usage whose counts do not add up: each field is in range (the schema cannot
# see more), and the model refuses it (`ProviderUsage`'s sums).
UNSUMMED = _mutated(
    RESULT_METERED,
    {
        "failed_beyond_forwarded": _set("usage.failed_requests", 4),
        "unmetered_beyond_answers": _set("usage.unmetered_requests", 3),
        "models_requests_short": _moved("usage.models.0.requests", -1),
        "models_count_failed_too": _moved("usage.models.0.requests", 1),
        "input_total_off": _moved("usage.input_tokens", 1),
        "output_total_off": _moved("usage.output_tokens", -1),
        "cache_read_total_off": _moved("usage.cache_read_tokens", 1),
        "cache_write_total_off": _moved("usage.cache_write_tokens", 1),
        "server_tools_total_off": _moved("usage.server_tool_uses", 1),
        "cost_not_the_sum": _moved("usage.cost", 0.01),
        "cost_null_though_priced": lambda d: d["usage"].update(cost=None, cost_note="why"),
        "cost_though_a_model_unpriced": lambda d: d["usage"]["models"][0].update(
            cost=None, cost_note="not in the price table"
        ),
        "models_unsorted": _all(_unknown_answer, lambda d: d["usage"]["models"].reverse()),
        "model_twice": _all(
            lambda d: d["usage"]["models"].append(
                {
                    **d["usage"]["models"][0],
                    "requests": 1,
                    **dict.fromkeys(TOKEN_COUNTS, 0),
                    "cost": 0.0,
                }
            ),
            _moved("usage.provider_requests", 1),
            _moved("usage.decisions.1.requests", 1),
        ),
        "decisions_unsorted": lambda d: d["usage"]["decisions"].reverse(),
        "decision_twice": _set("usage.decisions.1.decision", 0),
        "decisions_requests_short": _moved("usage.decisions.1.requests", -1),
        "decisions_input_off": _moved("usage.decisions.0.input_tokens", 5),
        "decisions_output_off": _moved("usage.decisions.1.output_tokens", -5),
        "provider_time_off": _moved("usage.provider_time_ms", 0.01),
        "verified_though_another_answered": lambda d: d["usage"]["models"][0].update(
            model="claude-opus-4-1"
        ),
        "not_verified_though_declared_answered": _set("usage.model_verified", False),
        "verified_with_an_unknown_answer": _all(
            _unknown_answer, _set("usage.model_verified", True)
        ),
    },
)


@pytest.mark.parametrize("name", [n for n, _ in UNSUMMED])
def test_metered_usage_whose_counts_do_not_add_up_is_refused(name: str) -> None:
    """What JSON Schema cannot say of metered usage the model checks: the frozen schema
    accepts each of these, the model refuses it (and a reader reports it as corrupt)."""
    doc = dict(UNSUMMED)[name]
    assert _verdicts("mailroom.episode_result/v7", EpisodeResult, doc) == (True, False)


def test_a_metered_result_keeps_its_usage_through_the_model() -> None:
    result = from_json(EpisodeResult, json.dumps(RESULT_METERED))
    assert isinstance(result.usage, ProviderUsage) and result.usage.model_verified is True
    assert result.confinement is not None and result.confinement.network == "gateway"
    unmetered = from_json(EpisodeResult, json.dumps(RESULT))
    assert isinstance(unmetered.usage, Usage) and unmetered.document() == RESULT
