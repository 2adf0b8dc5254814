"""Run directories whose sandboxed actors reached their provider through the provider
gateway, made here (no gateway, no simulator): results whose usage is what the gateway's
own ledger totals from its request records (`gateway/ledger.py`), the records kept
beside them as the gateway keeps them; and the five-case `usage_run` the report, export,
viewer and comparison tests read."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from mailroom.mailbox.schemas import schema_errors
from mailroom.orchestrator.catalog.cases import Case
from mailroom.orchestrator.catalog.plans import render_plan
from mailroom.orchestrator.families.plans import build_plan
from mailroom.orchestrator.gateway.ledger import EpisodeLedger, RequestRecord, usage_document
from mailroom.orchestrator.records.layout import AttemptPaths
from mailroom.orchestrator.records.result import RESULT_SCHEMA, EpisodeResult, Outcome
from mailroom.orchestrator.records.run_directory import RunDirectory
from mailroom.orchestrator.viewer.site import build_site
from older_records import result_as_v4
from recorded_runs import write_result
from run_manifests import gateway_manifest

DECLARED = "claude-test-1"
# A model name an actor could have made its provider answer with: markup for a terminal
# (Rich) and for a page (HTML) alike.
HOSTILE_MODEL = "[bold red]x[/bold red]<script>alert(1)</script>"


def answer(
    decision: int,
    model: str | None = DECLARED,
    *,
    tokens: tuple[int, int] = (1000, 100),
    cost: float | None = 0.01,
    note: str | None = None,
    total_ms: float = 800.0,
    cache: tuple[int, int] = (0, 0),
) -> RequestRecord:
    """A forwarded request the provider answered, naming `model`, priced at `cost`."""
    return RequestRecord(
        decision=decision,
        method="POST",
        route="/v1/messages",
        outcome="answered",
        reason=None,
        status=200,
        requested_model=DECLARED,
        answered_model=model,
        input_tokens=tokens[0],
        output_tokens=tokens[1],
        cache_read_tokens=cache[0],
        cache_write_tokens=cache[1],
        server_tool_uses=0,
        complete=True,
        cost=cost,
        cost_note=note,
        first_byte_ms=total_ms / 4,
        total_ms=total_ms,
        request_bytes=2000,
        response_bytes=600,
    )


def fault(decision: int, total_ms: float = 50.0) -> RequestRecord:
    """A forwarded request that ended in a provider fault (a 529: overloaded)."""
    return RequestRecord(
        decision=decision,
        method="POST",
        route="/v1/messages",
        outcome="provider_fault",
        reason="overloaded",
        status=529,
        requested_model=DECLARED,
        total_ms=total_ms,
        request_bytes=2000,
    )


def refused(decision: int) -> RequestRecord:
    return RequestRecord(
        decision=decision,
        method="POST",
        route="/v1/other",
        outcome="refused",
        reason="route not declared",
        status=403,
    )


def make_gateway_run(
    tmp_path: Path, *, kind: str = "development", run_id: str = "run-usage-test"
) -> tuple[RunDirectory, list[Case]]:
    """A run directory whose sandboxed actors reach their provider through the gateway."""
    plan = build_plan(kind)
    run = RunDirectory(tmp_path / "run")
    manifest = gateway_manifest(
        tmp_path, plan=plan, run_id=run_id, actor_command=["agent", "{endpoint}"]
    )
    run.write_manifest(manifest)
    run.plan_path.write_bytes(render_plan(plan))
    run.event("launched", volatile=manifest["volatile"])
    return run, plan.to_cases()


def write_metered(
    run: RunDirectory,
    case: Case,
    attempt: int,
    records: Sequence[RequestRecord],
    *,
    outcome: Outcome,
    declared: str | None = DECLARED,
    truncation: str | None = None,
    errors: Sequence[dict[str, Any]] = (),
    executed: int = 5,
) -> EpisodeResult:
    """A v7 result whose usage is what the gateway's ledger totals from `records`, the
    records kept as the attempt's provider-requests.jsonl."""
    write_result(run, case, attempt, outcome=outcome, executed=executed, proprio=False)
    directory = run.episode_dir(case.attempt_id(attempt))
    ledger = EpisodeLedger(AttemptPaths(directory).provider_requests)
    for record in records:
        ledger.add(record)
    ledger.close()
    path = AttemptPaths(directory).result
    document = json.loads(path.read_text())
    document["usage"] = usage_document(records, provider="anthropic", declared_model=declared)
    document["confinement"] = {"mode": "sandbox", "network": "gateway"}
    if truncation is not None:
        document["truncated"], document["truncation"] = True, truncation
    if errors:
        document["errors"] = list(errors)
    result = EpisodeResult.model_validate(document)
    assert schema_errors(RESULT_SCHEMA, result.document()) == []
    path.write_text(json.dumps(result.document()))
    return result


PROVIDER_UNAVAILABLE = {
    "kind": "infrastructure_error",
    "code": "provider_unavailable",
    "message": "the last 1 requests of decision 1 failed (overloaded)",
    "policy_call": 1,
}


def usage_run(tmp_path: Path) -> tuple[RunDirectory, list[Case]]:
    """The development plan's five cases:
    0. a success, metered: two answers of the declared model ($0.01, $0.02) and a fault;
    1. a failure truncated by the provider budget: an answer of the declared model and
       one of a model whose name is markup, which the price table does not price;
    2. an infrastructure error, provider_unavailable: one fault, no answer ($0);
    3. an external actor's success: not metered;
    4. a v4 result's failure: not metered."""
    run, cases = make_gateway_run(tmp_path)
    write_metered(
        run,
        cases[0],
        1,
        [
            answer(0, tokens=(2000, 50), cost=0.01, cache=(500, 100)),
            answer(1, tokens=(3000, 150), cost=0.02, total_ms=1200.0),
            fault(1),
        ],
        outcome="success",
    )
    write_metered(
        run,
        cases[1],
        1,
        [
            answer(1, cost=0.04),
            answer(2, HOSTILE_MODEL, cost=None, note=f"no price for {HOSTILE_MODEL}"),
            refused(2),
        ],
        outcome="failure",
        truncation="provider_budget",
    )
    write_metered(
        run, cases[2], 1, [fault(1)], outcome="error", errors=[PROVIDER_UNAVAILABLE], executed=0
    )
    write_result(run, cases[3], 1, outcome="success", executed=5, proprio=False)
    write_result(run, cases[4], 1, outcome="failure", executed=5, proprio=False)
    result_as_v4(run.episode_dir(cases[4].attempt_id(1)) / "result.json")
    return run, cases


def _event_line(kind: str, **fields: object) -> str:
    return json.dumps({"t": 1.0, "event": kind, **fields}) + "\n"


def usage_site(tmp_path: Path) -> tuple[RunDirectory, list[Case], Path]:
    """`usage_run`'s run, its first attempt's two decisions served (1.6 s and 0.3 s), as
    a site (`tmp_path/site`)."""
    run, cases = usage_run(tmp_path)
    directory = run.episode_dir(cases[0].attempt_id(1))
    (directory / "events.jsonl").write_text(
        "".join(
            _event_line("observation_published", sequence=n, image_sha256={}, feedback=None)
            + _event_line("response_claimed", sequence=n, outcome="accepted", decision=decision)
            + _event_line(
                "decision_served",
                sequence=n,
                latency_ms=latency,
                queue_delay_ms=0.5,
                processing_ms=2.0,
            )
            for n, decision, latency in ((1, "act", 1600.0), (2, "stop", 300.0))
        )
    )
    out = tmp_path / "site"
    build_site(run.root, out)
    return run, cases, out
