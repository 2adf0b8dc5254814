"""`mailroom report`'s provider usage on run directories made here (no simulator, no
gateway): each metered result's usage is what the gateway's own ledger totals from its
request records (`gateway/ledger.py`), the records kept beside it as the gateway keeps
them. What was metered is summed, what was not stays null with its reason, costs come
per episode and per success with their n, answering models are named escaped, the
gateway's typed endings are counted apart, and the table fits 80 columns."""

from __future__ import annotations

import io
import json
import subprocess
from pathlib import Path

import pytest
from conftest import mailroom_exe
from mailroom.orchestrator.cli.report import print_report
from mailroom.orchestrator.results.reporter import Report, build_report
from mailroom.orchestrator.results.usage import UsageSummary, summarize_usage, usd_text
from metered_runs import (
    DECLARED,
    HOSTILE_MODEL,
    PROVIDER_UNAVAILABLE,
    answer,
    fault,
    make_gateway_run,
    usage_run,
    write_metered,
)
from pydantic import ValidationError
from recorded_runs import make_run, write_result
from rich.console import Console
from run_manifests import GATEWAY

WIDTH = 80


def render(report: Report) -> str:
    out = Console(width=WIDTH, record=True, file=io.StringIO(), color_system=None)
    print_report(report, out)
    return out.export_text()


def flat(text: str) -> str:
    return " ".join(text.split())


def test_what_was_metered_is_summed_and_what_was_not_stays_null(tmp_path: Path) -> None:
    run, _ = usage_run(tmp_path)
    report = build_report(run.root)
    u = report.overall.provider_usage
    assert (u.results, u.metered) == (5, 3)
    assert u.unmetered == {"before_v7": 1, "external_actor": 1}
    assert (u.provider_requests, u.failed_requests, u.refused_requests) == (6, 2, 1)
    assert (u.input_tokens, u.output_tokens) == (2000 + 3000 + 1000 + 1000, 50 + 150 + 100 + 100)
    assert (u.cache_read_tokens, u.cache_write_tokens) == (500, 100)
    assert u.requests_per_episode == pytest.approx(2.0)
    assert u.provider_time_ms == pytest.approx(800 + 1200 + 50 + 800 + 800 + 50)
    # One answer of case 1 was not priced: no total, no cost per success; the mean per
    # episode is over the two priced episodes (case 0: $0.03, case 2: $0).
    assert (u.priced, u.unpriced) == (2, 1)
    assert u.cost_usd is None and u.cost_per_success_usd is None
    assert u.priced_cost_usd == pytest.approx(0.03)
    assert u.cost_per_episode_usd == pytest.approx(0.015)
    assert u.cost_notes == [f"no price for {HOSTILE_MODEL}"]
    assert u.successes_metered == 1
    assert [(m.model, m.episodes, m.requests) for m in u.models] == [
        (HOSTILE_MODEL, 1, 1),
        (DECLARED, 2, 3),
    ]
    declared = next(m for m in u.models if m.model == DECLARED)
    assert declared.cost_usd == pytest.approx(0.07) and declared.unpriced_episodes == 0
    assert (u.model_verified.verified, u.model_verified.not_verified) == (1, 1)
    assert u.model_verified.unknown == 1  # case 2: no answer, nothing to verify
    assert u.declared_models == [DECLARED] and u.other_models == [HOSTILE_MODEL]
    assert (u.provider_budget_truncations, u.provider_unavailable_errors) == (1, 1)
    assert u.host_network == 0
    assert report.provider_gateway is not None
    assert report.provider_gateway.price_table.retrieved == "2026-11-30"
    assert report.network == "gateway"
    # The suite's tally carries the same usage (one suite).
    assert report.suites["libero_10"].provider_usage == u


def test_the_json_document_keeps_numbers_as_numbers_and_nulls_as_nulls(tmp_path: Path) -> None:
    run, _ = usage_run(tmp_path)
    done = subprocess.run(
        [mailroom_exe(), "report", str(run.root), "--json"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    document = json.loads(done.stdout)
    u = document["overall"]["provider_usage"]
    assert u["metered"] == 3 and u["results"] == 5
    assert u["provider_requests"] == 6 and isinstance(u["input_tokens"], int)
    assert u["cost_usd"] is None and u["cost_per_success_usd"] is None
    assert u["cost_per_episode_usd"] == pytest.approx(0.015)
    assert u["unmetered"] == {"before_v7": 1, "external_actor": 1}
    assert u["model_verified"] == {"verified": 1, "not_verified": 1, "unknown": 1}
    assert document["provider_gateway"]["price_table"]["source"] == GATEWAY["price_table"]["source"]
    assert document["network"] == "gateway"
    assert "provider_usage" in document["definitions"]
    assert document["superseded_usage"]["provider_requests"] is None  # nothing superseded


def test_the_usage_section_fits_80_columns_and_escapes_model_names(tmp_path: Path) -> None:
    run, _ = usage_run(tmp_path)
    text = render(build_report(run.root))
    assert max(len(line) for line in text.splitlines()) <= WIDTH, text
    assert "…" not in text
    said = flat(text)
    assert (
        "provider usage: metered by the provider gateway in 3 of 5 results; 2 not metered "
        "(null, not zero): 1 result before v7, 1 external actor"
    ) in said
    assert "requests forwarded 6 2" in said
    assert "cost (USD) n/a $0.015" in said
    assert "$0.015 per episode (mean of 2 priced)" in said
    assert "per success n/a (the total is unknown)" in said
    assert "unpriced in 1 of 3 metered episodes ($0.03 over the priced)" in said
    # The markup an actor's provider named is shown as it was written, never applied.
    assert f"other answering models: {HOSTILE_MODEL}" in said
    assert said.count(HOSTILE_MODEL) == 2  # the cost note and the line (the table folds it)
    assert "\n [bold " in text  # the model table's row, as written
    assert "every answer named the declared model (claude-test-1) in 1 of 3 metered" in said
    assert "(1 with nothing to verify)" in said
    assert "prices: anthropic, the built-in table (https://www.anthropic.com/pricing)" in said
    assert "provider budget spent: 1 episode(s) truncated (provider_budget" in said
    assert "provider unavailable: 1 episode(s) ended infrastructure_error" in said
    assert "the infrastructure's failure, not the method's" in said
    assert "file mailbox cannot meter" not in said


def test_a_fully_priced_run_states_its_cost_per_episode_and_per_success(tmp_path: Path) -> None:
    run, cases = make_gateway_run(tmp_path, kind="fast")
    write_metered(run, cases[0], 1, [answer(1, cost=0.25), answer(2, cost=0.5)], outcome="success")
    write_metered(run, cases[1], 1, [answer(1, cost=0.25)], outcome="failure")
    report = build_report(run.root)
    u = report.overall.provider_usage
    assert u.cost_usd == pytest.approx(1.0)
    assert u.cost_per_episode_usd == pytest.approx(0.5)
    assert u.cost_per_success_usd == pytest.approx(1.0)  # the failure's cost counts too
    said = flat(render(report))
    assert "cost: $1.00 in all; $0.50 per episode (mean of 2 priced); $1.00 per success" in said
    assert "(total / 1 successes among the metered episodes)" in said
    assert "every answer named the declared model (claude-test-1) in 2 of 2" in said


def test_a_run_nothing_metered_says_null_never_zero(tmp_path: Path) -> None:
    run, cases = make_run(tmp_path, proprio=False)
    write_result(run, cases[0], 1, outcome="success", executed=5, proprio=False)
    write_result(run, cases[1], 1, outcome="failure", executed=5, proprio=False)
    report = build_report(run.root)
    u = report.overall.provider_usage
    assert (u.results, u.metered, u.unmetered) == (2, 0, {"external_actor": 2})
    for name in ("provider_requests", "input_tokens", "cost_usd", "cost_per_episode_usd"):
        assert getattr(u, name) is None, name
    assert report.provider_gateway is None
    text = render(report)
    assert (
        "provider usage: not metered in any of the 2 results (null, not zero): 2 external actor"
    ) in flat(text)
    assert "requests forwarded" not in text and "$" not in text


def test_a_run_on_the_hosts_network_is_marked_unmetered_and_not_confined(tmp_path: Path) -> None:
    run, cases = make_run(tmp_path, proprio=False)
    write_result(run, cases[0], 1, outcome="success", executed=5, proprio=False)
    path = run.episode_dir(cases[0].attempt_id(1)) / "result.json"
    document = json.loads(path.read_text())
    document["confinement"] = {"mode": "sandbox", "network": "host"}
    path.write_text(json.dumps(document))
    manifest = run.read_manifest()
    manifest["confinement"]["network"] = "host"
    run.manifest_path.write_text(json.dumps(manifest))
    report = build_report(run.root)
    u = report.overall.provider_usage
    assert u.host_network == 1 and u.unmetered == {"no_gateway": 1}
    said = flat(render(report))
    assert "1 no provider gateway" in said
    assert (
        "network: the run's actors had the host's network: their provider usage is not "
        "metered and they were not confined on the network"
    ) in said


def test_superseded_attempts_usage_is_said_apart(tmp_path: Path) -> None:
    run, cases = make_gateway_run(tmp_path, kind="fast")
    write_metered(
        run, cases[0], 1, [fault(1)], outcome="error", errors=[PROVIDER_UNAVAILABLE], executed=0
    )
    write_metered(run, cases[0], 2, [answer(1, cost=0.1)], outcome="success")
    report = build_report(run.root)
    assert report.overall.provider_usage.provider_requests == 1
    assert report.overall.provider_usage.provider_unavailable_errors == 0  # superseded
    assert report.superseded_usage.provider_requests == 1
    assert report.superseded_usage.provider_unavailable_errors == 1
    said = flat(render(report))
    assert "superseded attempts (in no rate): 1 of 1 metered, 1 requests, $0" in said


def test_a_summary_whose_parts_do_not_add_up_is_refused(tmp_path: Path) -> None:
    run, _ = usage_run(tmp_path)
    good = build_report(run.root).overall.provider_usage.model_dump()
    UsageSummary.model_validate(good)
    for broken in (
        {"metered": 4},  # metered + unmetered != results
        {"provider_requests": None},  # a null total with metered results
        {"cost_usd": 0.03},  # a total while an episode is unpriced
        {"model_verified": {"verified": 2, "not_verified": 0, "unknown": 0}},
    ):
        with pytest.raises(ValidationError):
            UsageSummary.model_validate({**good, **broken})
    assert summarize_usage([]) == UsageSummary()
    assert UsageSummary().provider_requests is None


@pytest.mark.parametrize(
    ("value", "shown"),
    [
        (None, "n/a"),
        (0.0, "$0"),
        (0.5, "$0.50"),
        (0.0123, "$0.0123"),
        (0.000041, "$0.000041"),
        (1.234, "$1.23"),
        (12345.6, "$12,345.60"),
    ],
)
def test_costs_read_as_dollars_never_rounded_away(value: float | None, shown: str) -> None:
    assert usd_text(value) == shown
    if value:
        assert usd_text(-value, signed=True) == "-" + shown
        assert usd_text(value, signed=True) == "+" + shown


def test_a_long_price_table_source_is_shortened_in_the_report_not_in_json() -> None:
    from mailroom.orchestrator.cli.report import SOURCE_SHOWN, price_table_line
    from mailroom.orchestrator.records.manifest import ProviderGatewayRecord

    long_source = "prices read from " + "https://example.invalid/page " * 40
    record = ProviderGatewayRecord.model_validate(
        {**GATEWAY, "price_table": {**GATEWAY["price_table"], "source": long_source}}
    )
    line = price_table_line(record)
    assert "…" in line and "its source in full: --json" in line
    assert len(line) < SOURCE_SHOWN + 160
    short = ProviderGatewayRecord.model_validate(GATEWAY)
    assert GATEWAY["price_table"]["source"] in price_table_line(short)
