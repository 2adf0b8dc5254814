"""`mailroom view` of provider usage, from run directories made here (no simulator, no
browser: tests/browser/test_viewer_browser.py opens these pages in Chromium): the run page's
usage with its cost per episode and per success, each attempt's usage per model and per
decision beside the decision's latency, null said where nothing was metered, a model
name an actor's provider gave escaped, and the comparison site's cost per run and per
pair."""

from __future__ import annotations

import json
import re
from pathlib import Path

from mailroom.orchestrator.catalog.cases import Case
from mailroom.orchestrator.viewer.comparison_site import build_comparison_site
from mailroom.orchestrator.viewer.run_page import ATTEMPT_COLUMNS
from mailroom.orchestrator.viewer.site import build_site
from metered_runs import HOSTILE_MODEL, answer, make_gateway_run, usage_site, write_metered
from recorded_runs import make_run, write_result

ESCAPED_MODEL = "[bold red]x[/bold red]&lt;script&gt;alert(1)&lt;/script&gt;"


def _attempt(out: Path, case: Case) -> str:
    return (out / "attempts" / case.attempt_id(1) / "index.html").read_text()


def _text(html: str) -> str:
    return " ".join(re.sub(r"<[^>]+>", " ", html).split())


def test_the_run_page_shows_what_was_metered_and_its_cost(tmp_path: Path) -> None:
    _, _, out = usage_site(tmp_path)
    index = (out / "index.html").read_text()
    said = _text(index)
    assert "file mailbox cannot meter" not in index
    assert (
        "provider usage: metered by the provider gateway in 3 of 5 results; 2 not metered "
        "(null, not zero): 1 result before v7, 1 external actor"
    ) in said
    (usage,) = re.findall(r'<table class="usage">.*?</table>', index)
    assert "overall 3 of 5 6 7,000 400 n/a $0.015 (n 2) n/a (n 1)" in _text(usage)
    assert "$0.015 per episode (mean of 2 priced)" in said
    assert "provider budget spent: 1 episode(s) truncated" in said
    assert "provider unavailable: 1 episode(s) ended infrastructure_error" in said
    assert "anthropic; prices from https://www.anthropic.com/pricing, retrieved 2026-11-30" in said
    assert "budgets per episode: requests 200, input tokens no limit" in said
    # The markup an actor's provider named is text, in the models table and the notes.
    assert "<script>alert" not in index
    assert index.count(ESCAPED_MODEL) == 3
    costs = [
        re.findall(r"<td[^>]*>(.*?)</td>", row)[ATTEMPT_COLUMNS.index("cost")]
        for row in re.findall(r'<tr class="attempt".*?</tr>', index)
    ]
    assert costs == ["$0.03", "n/a", "$0", "—", "—"]


def test_an_attempt_page_shows_its_usage_per_model_and_per_decision(tmp_path: Path) -> None:
    _, cases, out = usage_site(tmp_path)
    page = _attempt(out, cases[0])
    said = _text(page)
    assert "requests forwarded 3 (1 failed by the provider" in said
    assert "cost (USD) $0.03" in said and "every answer named the declared model yes" in said
    (decisions,) = re.findall(r'<table class="usage-decisions">.*?</table>', page)
    assert _text(decisions).endswith(
        "before the first observation 1 800 ms — — 2,000 50 "
        "policy call 1 2 1.2 s 1.6 s 78% 3,000 150"
    )
    # Each policy call's provider time beside its latency.
    shown = re.findall(r'<span class="provider-time">(.*?)</span>', page)
    assert shown == ["1.2 s (78% of latency), 2 request(s)", "no request"]
    hostile = _attempt(out, cases[1])
    # The model, and the price table's note naming it, in the facts and the model's row.
    assert "<script>alert" not in hostile and hostile.count(ESCAPED_MODEL) == 3
    assert "cost (USD) n/a: no price for " in _text(hostile)
    assert "every answer named the declared model no" in _text(hostile)
    for case, why in ((cases[3], "external actor"), (cases[4], "result before v7")):
        assert f"not metered (null, not zero): {why}" in _text(_attempt(out, case))
        assert "provider-time" not in _attempt(out, case)


def test_the_comparison_site_shows_each_runs_cost_and_each_pairs(tmp_path: Path) -> None:
    a, a_cases = make_gateway_run(tmp_path / "a", kind="fast", run_id="a")
    write_metered(a, a_cases[0], 1, [answer(1, cost=0.25)], outcome="success")
    write_metered(a, a_cases[1], 1, [answer(1, cost=0.75)], outcome="failure")
    b, b_cases = make_gateway_run(tmp_path / "b", kind="fast", run_id="b")
    write_metered(b, b_cases[0], 1, [answer(1, HOSTILE_MODEL, cost=0.5)], outcome="success")
    write_metered(b, b_cases[1], 1, [answer(1, cost=1.5)], outcome="success")
    out = tmp_path / "compared"
    build_comparison_site([a.root, b.root], out)
    index = (out / "index.html").read_text()
    rows = {
        label: re.findall(r"<td[^>]*>(.*?)</td>", row)
        for label, row in re.findall(r"<tr><th>(.*?)</th>(.*?)</tr>", index)
    }
    assert rows["provider usage"] == ["metered in 2 of 2 results"] * 2
    assert rows["cost per episode"] == ["$0.50 (n 2)", "$1.00 (n 2)"]
    assert rows["cost per success"] == ["$1.00 (n 1)", "$1.00 (n 2)"]
    (paired,) = re.findall(r'<p class="paired-cost">(.*?)</p>', index)
    assert paired == (
        "cost over the 2 of 2 paired cases priced in both runs: A $1.00 ($0.50 per episode), "
        "B $2.00 ($1.00 per episode); B - A +$0.50 per episode"
    )
    run_b = out / "runs" / "2-run" / "index.html"
    assert "<script>alert" not in run_b.read_text() and ESCAPED_MODEL in run_b.read_text()


def test_a_run_nothing_metered_shows_no_cost_column_and_says_why(tmp_path: Path) -> None:
    run, cases = make_run(tmp_path, proprio=False)
    write_result(run, cases[0], 1, outcome="success", executed=5, proprio=False)
    build_site(run.root, tmp_path / "site")
    index = (tmp_path / "site" / "index.html").read_text()
    assert "<th>cost</th>" not in index and "<th>simulator</th>" in index
    assert (
        "provider usage: not metered in any of the 1 result (null, not zero): 1 external actor"
    ) in _text(index)
    assert "none: provider usage not metered" in _text(index)
    assert '<table class="usage">' not in index


def test_a_run_on_the_hosts_network_is_marked_on_its_page(tmp_path: Path) -> None:
    run, cases = make_run(tmp_path, proprio=False)
    write_result(run, cases[0], 1, outcome="success", executed=5, proprio=False)
    manifest = run.read_manifest()
    manifest["confinement"]["network"] = "host"
    run.manifest_path.write_text(json.dumps(manifest))
    build_site(run.root, tmp_path / "site")
    index = (tmp_path / "site" / "index.html").read_text()
    (marked,) = re.findall(r'<p class="warn host-network">(.*?)</p>', index)
    assert marked == (
        "network: the run&#x27;s actors had the host&#x27;s network: their provider usage is "
        "not metered and they were not confined on the network"
    )
