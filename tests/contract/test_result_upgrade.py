"""Episode results of every version read as the current one (`records/upgrade.py`).

A current result is checked by its generated schema and its model; an older one by its
own frozen schema first, then upgraded step by step, each field its version did not
record filled with null (its usage: nothing could meter it before the gateway).
"""

from __future__ import annotations

import copy
import json

import pytest
from document_mutations import DELETE, Doc, Mutation, all_of, moved, mutated, set_at
from mailroom.mailbox.messages import from_json
from mailroom.mailbox.schemas import schema_errors
from mailroom.orchestrator.episode.runner import settings_record
from mailroom.orchestrator.episode.settings import RunSettings
from mailroom.orchestrator.records.confinement import ConfinementRecord
from mailroom.orchestrator.records.result import (
    RESULT_SCHEMA,
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
from mailroom.orchestrator.records.upgrade import (
    RESULT_HISTORY,
    RecordRefusedError,
    upgrade_result,
)
from pydantic import ValidationError


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
        settings=settings_record(RunSettings(proprio=False), 1000, settling_controls=10),
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


def _unpriced(note: str) -> Mutation:
    """The model's cost, and so the total, not priced, with `note` saying why."""
    return all_of(
        set_at("usage.models.0.cost", None),
        set_at("usage.models.0.cost_note", note),
        set_at("usage.cost", None),
        set_at("usage.cost_note", note),
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


RESULT_METERED = mutated(RESULT, {"metered": _metered})[0][1]
RESULT_VALID = [
    ("base", RESULT),
    ("metered", RESULT_METERED),
    *mutated(
        RESULT_METERED,
        {
            "metered_unknown_answer": _unknown_answer,
            "metered_nothing_forwarded": _nothing_forwarded,
            "metered_no_declared_model": lambda d: d["usage"].update(
                declared_model=None, model_verified=None
            ),
            "metered_other_model": all_of(
                set_at("usage.models.0.model", "claude-opus-4-1"),
                set_at("usage.model_verified", False),
            ),
            "metered_openai": set_at("usage.provider", "openai_responses"),
            "metered_gemini": set_at("usage.provider", "gemini"),
            "provider_budget_spent": all_of(
                set_at("truncated", True),
                set_at("truncation", "provider_budget"),
                set_at("termination", None),
                set_at("outcome", "failure"),
            ),
            "metered_unpriced": _unpriced("not in the price table"),
            "metered_integer_time": all_of(
                set_at("usage.provider_time_ms", 2500),
                set_at("usage.decisions.0.provider_time_ms", 500),
                set_at("usage.decisions.1.provider_time_ms", 2000),
            ),
            # Times rounded to the microsecond at each addition still add up.
            "metered_rounded_time": set_at("usage.provider_time_ms", 2500.501),
            "metered_unconfined": set_at("confinement", {"mode": "none", "network": "host"}),
            "metered_no_network": set_at("confinement.network", "none"),
            "metered_long_note": _unpriced("n" * 500),
        },
    ),
    *mutated(
        RESULT,
        {
            "error_outcome": set_at("outcome", "error"),
            "no_errors": set_at("errors", []),
            "integer_wall_time": set_at("wall_time_s", 60),
            "first_success": set_at("counters.first_success_control", 12),
            "unconfined": set_at("confinement", {"mode": "none", "network": "host"}),
            "external": set_at("confinement", {"mode": "external", "network": None}),
            "instructions_v1": set_at("instructions_version", "v1"),
            "instructions_v12": set_at("instructions_version", "v12"),
            "dedicated": set_at("simulator", "dedicated"),
            "never_started": set_at("simulator", "none"),
            "memory_not_enforced": set_at("enforcement.memory", "not enforced"),
            "writable_space_sampled": set_at("enforcement.writable_space", "sampled"),
            "nothing_enforced": set_at(
                "enforcement", {"memory": "not enforced", "writable_space": "sampled"}
            ),
            "gateway_unmetered": set_at("confinement.network", "gateway"),
        },
    ),
]
RESULT_INVALID = mutated(
    RESULT,
    {
        "outcome_other": set_at("outcome", "maybe"),
        "termination_other": set_at("termination", "crashed"),
        "negative_calls": set_at("counters.policy_calls", -1),
        "float_calls": set_at("counters.policy_calls", 3.0),
        "string_calls": set_at("counters.policy_calls", "3"),
        "error_code_upper": set_at("errors.0.code", "Bad"),
        "error_code_newline": set_at("errors.0.code", "out_of_bounds\n"),
        "error_kind_other": set_at("errors.0.kind", "oops"),
        "extra_field": set_at("seed", 7),
        "short_sha": set_at("case.bddl_sha256", "ab"),
        "handling_other": set_at("settings.invalid_action_handling", "clip"),
        "truncated_string": set_at("truncated", "yes"),
        "negative_wall_time": set_at("wall_time_s", -1),
        "missing_attempt": set_at("attempt_id", DELETE),
        "usage_cost_zero": set_at("usage.cost", 0),
        "first_success_zero": set_at("counters.first_success_control", 0),
        "no_confinement": set_at("confinement", DELETE),
        "confinement_other": set_at("confinement.mode", "jail"),
        "network_other": set_at("confinement.network", "lan"),
        "confinement_extra": set_at("confinement.uid", 7),
        "as_v1": set_at("schema", "mailroom.episode_result/v1"),
        "as_v2": set_at("schema", "mailroom.episode_result/v2"),
        "as_v3": set_at("schema", "mailroom.episode_result/v3"),
        "as_v4": set_at("schema", "mailroom.episode_result/v4"),
        "as_v5": set_at("schema", "mailroom.episode_result/v5"),
        "no_enforcement": set_at("enforcement", DELETE),
        "enforcement_empty": set_at("enforcement", {}),
        "no_memory": set_at("enforcement.memory", DELETE),
        "no_writable_space": set_at("enforcement.writable_space", DELETE),
        "memory_bool": set_at("enforcement.memory", True),
        "memory_not_enforced_underscore": set_at("enforcement.memory", "not_enforced"),
        "memory_upper": set_at("enforcement.memory", "Enforced"),
        "memory_null": set_at("enforcement.memory", None),
        "writable_space_other": set_at("enforcement.writable_space", "enforced"),
        "writable_space_null": set_at("enforcement.writable_space", None),
        "enforcement_extra": set_at("enforcement.memory_reason", "no cgroup"),
        "enforcement_string": set_at("enforcement", "enforced"),
        "no_simulator": set_at("simulator", DELETE),
        "simulator_other": set_at("simulator", "shared"),
        "simulator_upper": set_at("simulator", "Parked"),
        "simulator_bool": set_at("simulator", True),
        "no_instructions_version": set_at("instructions_version", DELETE),
        "instructions_unversioned": set_at("instructions_version", "2"),
        "instructions_v0": set_at("instructions_version", "v0"),
        "instructions_v02": set_at("instructions_version", "v02"),
        "instructions_upper": set_at("instructions_version", "V2"),
        "instructions_newline": set_at("instructions_version", "v2\n"),
        "instructions_file": set_at("instructions_version", "prompts/actor_instructions_v2.txt"),
        "instructions_number": set_at("instructions_version", 2),
        "no_queue_delay": set_at("queue_delay", DELETE),
        "no_processing": set_at("processing", DELETE),
        "negative_queue_delay": set_at("queue_delay.total_ms", -1.0),
        "queue_delay_extra": set_at("queue_delay.p95_ms", 1.0),
        "unmetered_source_gateway": set_at("usage.source", "gateway"),
        "unmetered_with_requests": set_at("usage.provider_requests", 3),
        "usage_source_other": set_at("usage.source", "proxy"),
        "network_gateway_upper": set_at("confinement.network", "Gateway"),
    },
)
# Metered usage that the schema and the model both refuse.
RESULT_METERED_INVALID = mutated(
    RESULT_METERED,
    {
        "metered_as_v6": set_at("schema", "mailroom.episode_result/v6"),
        "metered_source_other": set_at("usage.source", "proxy"),
        "metered_no_source": set_at("usage.source", DELETE),
        "metered_provider_other": set_at("usage.provider", "openai"),
        "metered_provider_null": set_at("usage.provider", None),
        "metered_extra": set_at("usage.total_tokens", 1500),
        "metered_model_extra": set_at("usage.models.0.total_tokens", 1500),
        "metered_decision_extra": set_at("usage.decisions.0.cache_read_tokens", 0),
        "metered_no_decisions": set_at("usage.decisions", DELETE),
        "metered_no_models": set_at("usage.models", DELETE),
        "metered_no_refused": set_at("usage.refused_requests", DELETE),
        "metered_negative_refused": set_at("usage.refused_requests", -1),
        "metered_float_requests": set_at("usage.provider_requests", 3.0),
        "metered_string_tokens": set_at("usage.input_tokens", "1200"),
        "metered_null_tokens": set_at("usage.output_tokens", None),
        "metered_negative_cost": set_at("usage.cost", -0.01),
        "metered_cost_without_note": set_at("usage.models.0.cost", None),
        "metered_cost_and_note": set_at("usage.cost_note", "estimated"),
        "metered_empty_note": _unpriced(""),
        "metered_note_too_long": _unpriced("n" * 501),
        "metered_model_empty_name": set_at("usage.models.0.model", ""),
        "metered_model_name_too_long": set_at("usage.models.0.model", "m" * 201),
        "metered_model_zero_requests": set_at("usage.models.0.requests", 0),
        "metered_decision_zero_requests": set_at("usage.decisions.0.requests", 0),
        "metered_decision_negative": set_at("usage.decisions.0.decision", -1),
        "metered_negative_time": set_at("usage.provider_time_ms", -1.0),
        "metered_verified_null": set_at("usage.model_verified", None),
        "metered_verified_string": set_at("usage.model_verified", "yes"),
        "metered_verified_without_declared": set_at("usage.declared_model", None),
        "metered_declared_empty": set_at("usage.declared_model", ""),
        "metered_verified_without_answers": all_of(
            _nothing_forwarded, set_at("usage.model_verified", True)
        ),
        "metered_models_not_a_list": set_at("usage.models", {}),
        "metered_usage_null": set_at("usage", None),
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


# Results of v7: the provider gateway's, before a provider could be Gemini.
RESULT_V7 = {**RESULT, "schema": "mailroom.episode_result/v7"}
RESULT_V7_METERED = {**RESULT_METERED, "schema": "mailroom.episode_result/v7"}
RESULT_V7_VALID = [("base", RESULT_V7), ("metered", RESULT_V7_METERED)]
RESULT_V7_INVALID = mutated(
    RESULT_V7_METERED,
    {
        "metered_gemini": set_at("usage.provider", "gemini"),
        "metered_external": set_at("confinement", {"mode": "external", "network": None}),
        "null_enforcement": set_at("enforcement", None),
    },
)


# Results written before the provider gateway: nothing in them was metered, and no
# actor's network was the gateway.
RESULT_V6 = {**RESULT, "schema": "mailroom.episode_result/v6"}
RESULT_V6_VALID = [
    ("base", RESULT_V6),
    *mutated(
        RESULT_V6,
        {
            "unconfined": set_at("confinement", {"mode": "none", "network": "host"}),
            "external": set_at("confinement", {"mode": "external", "network": None}),
        },
    ),
]
RESULT_V6_INVALID = mutated(
    RESULT_V6,
    {
        "metered": set_at("usage", METERED),
        "metered_unconfined": all_of(
            set_at("usage", METERED), set_at("confinement", {"mode": "none", "network": "host"})
        ),
        "gateway_network": set_at("confinement.network", "gateway"),
        "provider_budget": all_of(
            set_at("truncated", True),
            set_at("truncation", "provider_budget"),
            set_at("termination", None),
            set_at("outcome", "failure"),
        ),
        "as_v5": set_at("schema", "mailroom.episode_result/v5"),
        "no_enforcement": set_at("enforcement", DELETE),
    },
)


# Results written before enforcement was recorded.
RESULT_V5 = mutated(RESULT, {"v5": _v5})[0][1]
RESULT_V5_VALID = [
    ("base", RESULT_V5),
    *mutated(RESULT_V5, {"never_started": set_at("simulator", "none")}),
]
RESULT_V5_INVALID = mutated(
    RESULT_V5,
    {
        "with_enforcement": set_at("enforcement", RESULT["enforcement"]),
        "null_enforcement": set_at("enforcement", None),
        "as_v6": set_at("schema", "mailroom.episode_result/v6"),
        "as_v4": set_at("schema", "mailroom.episode_result/v4"),
        "no_simulator": set_at("simulator", DELETE),
        "metered": set_at("usage", METERED),
        "gateway_network": set_at("confinement.network", "gateway"),
    },
)


# Results written before the simulator's holding was recorded.
RESULT_V4 = mutated(RESULT, {"v4": _v4})[0][1]
RESULT_V4_VALID = [("base", RESULT_V4)]
RESULT_V4_INVALID = mutated(
    RESULT_V4,
    {
        "with_simulator": set_at("simulator", "parked"),
        "null_simulator": set_at("simulator", None),
        "with_enforcement": set_at("enforcement", RESULT["enforcement"]),
        "as_v5": set_at("schema", "mailroom.episode_result/v5"),
        "no_instructions_version": set_at("instructions_version", DELETE),
    },
)


# Results written before the instructions version was recorded.
RESULT_V3 = mutated(RESULT, {"v3": _v3})[0][1]
RESULT_V3_VALID = [("base", RESULT_V3)]
RESULT_V3_INVALID = mutated(
    RESULT_V3,
    {
        "with_instructions_version": set_at("instructions_version", "v1"),
        "null_instructions_version": set_at("instructions_version", None),
        "with_simulator": set_at("simulator", "dedicated"),
        "as_v4": set_at("schema", "mailroom.episode_result/v4"),
        "as_v2": set_at("schema", "mailroom.episode_result/v2"),
        "no_queue_delay": set_at("queue_delay", DELETE),
    },
)


# Results written before the queueing split existed.
RESULT_V2 = mutated(RESULT, {"v2": _v2})[0][1]
RESULT_V2_VALID = [("base", RESULT_V2)]
RESULT_V2_INVALID = mutated(
    RESULT_V2,
    {
        "with_queue_delay": set_at("queue_delay", RESULT["queue_delay"]),
        "with_instructions_version": set_at("instructions_version", "v1"),
        "as_v3": set_at("schema", "mailroom.episode_result/v3"),
        "no_confinement": set_at("confinement", DELETE),
        "gateway_network": set_at("confinement.network", "gateway"),
    },
)


# Results written before confinement existed.
RESULT_V1 = mutated(RESULT, {"v1": _v1})[0][1]
RESULT_V1_VALID = [("base", RESULT_V1)]
RESULT_V1_INVALID = mutated(
    RESULT_V1,
    {
        "with_confinement": set_at("confinement", {"mode": "sandbox", "network": "none"}),
        "as_v2": set_at("schema", "mailroom.episode_result/v2"),
        "with_queue_delay": set_at("queue_delay", RESULT["queue_delay"]),
        "with_instructions_version": set_at("instructions_version", "v1"),
        "extra_field": set_at("seed", 7),
    },
)
# Every field is due on the wire, where the Python model has a default or not.
RESULT_WIRE_CASES = mutated(
    RESULT,
    {
        "missing_schema": set_at("schema", DELETE),
        "missing_counter": set_at("counters.policy_calls", DELETE),
        "missing_usage_source": set_at("usage.source", DELETE),
        "started_at_not_a_date_time": set_at("started_at", "yesterday"),
    },
)


# Metered usage whose counts do not add up: each field is in range (the schema cannot
# see more), and the model refuses it (`ProviderUsage`'s sums); and metered usage of an
# external actor, which the model refuses by the confinement beside it.
MODEL_ONLY = mutated(
    RESULT_METERED,
    {
        "metered_external": set_at("confinement", {"mode": "external", "network": None}),
        "failed_beyond_forwarded": set_at("usage.failed_requests", 4),
        "unmetered_beyond_answers": set_at("usage.unmetered_requests", 3),
        "models_requests_short": moved("usage.models.0.requests", -1),
        "models_count_failed_too": moved("usage.models.0.requests", 1),
        "input_total_off": moved("usage.input_tokens", 1),
        "output_total_off": moved("usage.output_tokens", -1),
        "cache_read_total_off": moved("usage.cache_read_tokens", 1),
        "cache_write_total_off": moved("usage.cache_write_tokens", 1),
        "server_tools_total_off": moved("usage.server_tool_uses", 1),
        "cost_not_the_sum": moved("usage.cost", 0.01),
        "cost_null_though_priced": lambda d: d["usage"].update(cost=None, cost_note="why"),
        "cost_though_a_model_unpriced": lambda d: d["usage"]["models"][0].update(
            cost=None, cost_note="not in the price table"
        ),
        "models_unsorted": all_of(_unknown_answer, lambda d: d["usage"]["models"].reverse()),
        "model_twice": all_of(
            lambda d: d["usage"]["models"].append(
                {
                    **d["usage"]["models"][0],
                    "requests": 1,
                    **dict.fromkeys(TOKEN_COUNTS, 0),
                    "cost": 0.0,
                }
            ),
            moved("usage.provider_requests", 1),
            moved("usage.decisions.1.requests", 1),
        ),
        "decisions_unsorted": lambda d: d["usage"]["decisions"].reverse(),
        "decision_twice": set_at("usage.decisions.1.decision", 0),
        "decisions_requests_short": moved("usage.decisions.1.requests", -1),
        "decisions_input_off": moved("usage.decisions.0.input_tokens", 5),
        "decisions_output_off": moved("usage.decisions.1.output_tokens", -5),
        "provider_time_off": moved("usage.provider_time_ms", 0.01),
        "verified_though_another_answered": lambda d: d["usage"]["models"][0].update(
            model="claude-opus-4-1"
        ),
        "not_verified_though_declared_answered": set_at("usage.model_verified", False),
        "verified_with_an_unknown_answer": all_of(
            _unknown_answer, set_at("usage.model_verified", True)
        ),
    },
)


# Each version's documents, and the fields it did not record (null once upgraded).
V = "mailroom.episode_result/v"
OLDER: dict[str, tuple[list[tuple[str, Doc]], list[tuple[str, Doc]], tuple[str, ...]]] = {
    f"{V}7": (RESULT_V7_VALID, RESULT_V7_INVALID, ()),
    f"{V}6": (RESULT_V6_VALID, RESULT_V6_INVALID, ()),
    f"{V}5": (RESULT_V5_VALID, RESULT_V5_INVALID, ("enforcement",)),
    f"{V}4": (RESULT_V4_VALID, RESULT_V4_INVALID, ("enforcement", "simulator")),
    f"{V}3": (
        RESULT_V3_VALID,
        RESULT_V3_INVALID,
        ("enforcement", "simulator", "instructions_version"),
    ),
    f"{V}2": (
        RESULT_V2_VALID,
        RESULT_V2_INVALID,
        ("enforcement", "simulator", "instructions_version", "queue_delay", "processing"),
    ),
    f"{V}1": (
        RESULT_V1_VALID,
        RESULT_V1_INVALID,
        (
            "enforcement",
            "simulator",
            "instructions_version",
            "queue_delay",
            "processing",
            "confinement",
        ),
    ),
}
BEFORE_GATEWAY = {f"{V}{n}" for n in range(1, 7)}
# Current documents with what an upgrade leaves null: valid in the current version.
RESULT_NOT_RECORDED = mutated(
    RESULT,
    {
        f"null_{name}": set_at(name, None)
        for name in ("confinement", "enforcement", "simulator", "instructions_version")
    }
    | {"null_queue_delay": all_of(set_at("queue_delay", None), set_at("processing", None))},
)
CURRENT_VALID = RESULT_VALID + RESULT_NOT_RECORDED
CURRENT_INVALID = RESULT_INVALID + RESULT_METERED_INVALID + RESULT_WIRE_CASES
OLDER_VALID = [(v, n, d) for v, (valid, _, _) in OLDER.items() for n, d in valid]
OLDER_INVALID = [(v, n, d) for v, (_, invalid, _) in OLDER.items() for n, d in invalid]


def test_the_history_ends_at_the_current_version() -> None:
    assert RESULT_HISTORY.current == RESULT_SCHEMA == "mailroom.episode_result/v8"
    assert RESULT_HISTORY.versions == tuple(f"{V}{n}" for n in range(1, 9))


@pytest.mark.parametrize(("name", "doc"), CURRENT_VALID, ids=[n for n, _ in CURRENT_VALID])
def test_a_current_result_reads_as_it_was_written(name: str, doc: Doc) -> None:
    assert schema_errors(RESULT_SCHEMA, doc) == []
    assert upgrade_result(doc).document() == doc
    assert from_json(EpisodeResult, json.dumps(doc)).document() == doc


@pytest.mark.parametrize(("name", "doc"), CURRENT_INVALID, ids=[n for n, _ in CURRENT_INVALID])
def test_a_current_result_its_schema_refuses_the_model_refuses_too(name: str, doc: Doc) -> None:
    named = doc.get("schema")
    with pytest.raises(RecordRefusedError) as refused:
        upgrade_result(doc)
    assert refused.value.version == (named if named in RESULT_HISTORY.versions else None)
    assert refused.value.problem
    if named in (RESULT_SCHEMA, None):
        with pytest.raises(ValidationError):
            from_json(EpisodeResult, json.dumps(doc))


@pytest.mark.parametrize(("name", "doc"), MODEL_ONLY, ids=[n for n, _ in MODEL_ONLY])
def test_what_only_the_model_can_check_is_refused_naming_the_version(name: str, doc: Doc) -> None:
    """The generated schema accepts each of these; the model refuses it (a reader
    reports it as corrupt)."""
    assert schema_errors(RESULT_SCHEMA, doc) == []
    with pytest.raises(RecordRefusedError) as refused:
        upgrade_result(doc)
    assert refused.value.version == RESULT_SCHEMA
    assert str(refused.value).startswith(f"does not match {RESULT_SCHEMA}: ")


@pytest.mark.parametrize(
    ("version", "name", "doc"), OLDER_VALID, ids=[f"{v[-2:]}-{n}" for v, n, _ in OLDER_VALID]
)
def test_an_older_result_reads_as_the_current_version(version: str, name: str, doc: Doc) -> None:
    assert schema_errors(version, doc) == []
    upgraded = upgrade_result(doc).document()
    assert upgraded["schema"] == RESULT_SCHEMA
    not_recorded = OLDER[version][2]
    assert all(upgraded[field] is None for field in not_recorded)
    changed = {"schema", *not_recorded}
    if version in BEFORE_GATEWAY:
        assert upgraded["usage"] == {**doc["usage"], "source": "unavailable_before_gateway"}
        changed.add("usage")
    kept = {k: v for k, v in upgraded.items() if k not in changed}
    assert kept == {k: v for k, v in doc.items() if k not in changed}


@pytest.mark.parametrize(
    ("version", "name", "doc"), OLDER_INVALID, ids=[f"{v[-2:]}-{n}" for v, n, _ in OLDER_INVALID]
)
def test_an_older_result_its_frozen_schema_refuses_is_refused_naming_its_version(
    version: str, name: str, doc: Doc
) -> None:
    with pytest.raises(RecordRefusedError) as refused:
        upgrade_result(doc)
    assert refused.value.version == doc["schema"]
    assert str(refused.value).startswith(f"does not match {doc['schema']}: ")


@pytest.mark.parametrize(
    "doc",
    [{**RESULT, "schema": f"{V}9"}, {**RESULT, "schema": f"{V}0"}, [RESULT], "a result", None],
)
def test_a_version_this_code_does_not_know_is_refused(doc: object) -> None:
    with pytest.raises(RecordRefusedError) as refused:
        upgrade_result(doc)
    assert refused.value.version is None
    assert str(refused.value).startswith("is not an episode result: ")


def test_upgrading_leaves_the_document_as_it_was() -> None:
    doc = copy.deepcopy(RESULT_V1)
    upgrade_result(doc)
    assert doc == RESULT_V1


def test_a_metered_result_keeps_its_usage_through_the_model() -> None:
    result = upgrade_result(RESULT_METERED)
    assert isinstance(result.usage, ProviderUsage) and result.usage.model_verified is True
    assert result.confinement is not None and result.confinement.network == "gateway"
    unmetered = upgrade_result(RESULT)
    assert isinstance(unmetered.usage, Usage) and unmetered.document() == RESULT
    assert unmetered.usage.source == "unavailable_file_mailbox"
