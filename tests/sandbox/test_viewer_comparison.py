"""`mailroom view RUN_A RUN_B ...`: the comparison site's data, from real runs (no
simulator, no browser; tests/browser/test_viewer_comparison_browser.py opens the same site in
Chromium).

The runs: four real `mailroom launch`es of the toy family's plan (tests/support/toy_family: a
fake simulator, sandboxed actors, no LIBERO): the diagnostic actor (succeeds), a shell
actor that stops before success (fails), an actor whose note is markup (succeeds), and
the diagnostic actor under fewer policy calls (other protocol settings). What the site
shows must be what `mailroom report --json` and `mailroom compare --json` say of them.
"""

from __future__ import annotations

import html
import json
import re
import statistics
import urllib.request
from pathlib import Path

import kept_catalog_runs
import pytest
import toy_comparison_runs
import toy_family_runs
from conftest import run_cli
from kept_catalog_runs import CELLS, para_run
from mailroom.orchestrator.records.event_log import read_log
from mailroom.orchestrator.records.layout import AttemptPaths
from mailroom.orchestrator.results.comparison import compare_runs
from mailroom.orchestrator.results.proportions import wilson_interval
from mailroom.orchestrator.results.reporter import build_report
from mailroom.orchestrator.viewer.comparison_data import read_comparison
from mailroom.orchestrator.viewer.comparison_site import build_comparison_site
from mailroom.orchestrator.viewer.markup import CSP
from mailroom.orchestrator.viewer.readable import readable_duration_ms
from mailroom.orchestrator.viewer.wilson_chart import (
    CHAR_PX,
    MAX_LABEL_CHARS,
    ChartRow,
    wilson_chart,
)
from recorded_runs import run_with_outcomes, write_result
from served_pages import RELOADS, rebuilt_page, served_view, settled_page
from toy_comparison_runs import RUNS, SAME_SETTINGS, ToyRuns

# Fixtures of tests/support, used by name.
toy_env = toy_family_runs.toy_env
toy_runs = toy_comparison_runs.toy_runs
undeclared = kept_catalog_runs.undeclared

# -- reading the site's own markup back --------------------------------------------------


def _text(markup: str) -> str:
    return html.unescape(re.sub(r"<[^>]+>", "", markup))


def rate_rows(index: str) -> dict[tuple[str, str], dict[str, str]]:
    """(run key, suite) -> each cell of its row in the rates tables, as text."""
    rows = {}
    for run, suite, cells in re.findall(
        r'<tr class="rate" data-run="([^"]+)" data-suite="([^"]+)">(.*?)</tr>', index
    ):
        fields = re.findall(r'<td data-field="([^"]+)">(.*?)</td>', cells)
        rows[(run, suite)] = {name: _text(value) for name, value in fields}
    return rows


def pair_sections(index: str) -> dict[tuple[str, str], str]:
    """(A's key, B's key) -> the markup of that pair's section."""
    return {
        (a, b): body
        for a, b, body in re.findall(
            r'<section class="pair" data-a="([^"]+)" data-b="([^"]+)">(.*?)</section>', index
        )
    }


def paired_rows(section: str) -> dict[str, dict[str, str]]:
    rows = {}
    for suite, cells in re.findall(r'<tr class="paired" data-suite="([^"]+)">(.*?)</tr>', section):
        rows[suite] = {
            n: _text(v) for n, v in re.findall(r'<td data-field="([^"]+)">(.*?)</td>', cells)
        }
    return rows


def group_sections(index: str) -> dict[str, str]:
    return dict(
        re.findall(
            r'<section class="group" id="group-\d+" data-group="(\d+)">(.*?)</section>', index
        )
    )


def _percent(rate: float | None) -> str:
    return "n/a" if rate is None else f"{rate:.1%}"


def _interval(interval: dict[str, float] | None) -> str:
    return "n/a" if interval is None else f"{interval['low']:.1%} to {interval['high']:.1%}"


# -- the tests ---------------------------------------------------------------------------


def test_each_runs_rates_are_its_reports(toy_runs: ToyRuns) -> None:
    index = (toy_runs.site / "index.html").read_text(encoding="utf-8")
    rows = rate_rows(index)
    assert {key for key, _ in rows} == {toy_runs.key(name) for name in RUNS}
    for name in RUNS:
        report = toy_runs.report(name)
        for suite, tally in [*report["suites"].items(), ("overall", report["overall"])]:
            row = rows[(toy_runs.key(name), suite)]
            for count in ("selected", "completed", "success", "errored", "unattempted"):
                assert row[count] == str(tally[count]), (name, suite, count)
            for over in ("selected", "completed"):
                rate = tally[f"success_rate_over_{over}"]
                assert row[f"rate_{over}"] == _percent(rate)
                assert row[f"interval_{over}"] == _interval(
                    tally[f"success_rate_over_{over}_interval"]
                )
    assert rows[(toy_runs.key("scripted"), "overall")]["rate_selected"] == "100.0%"
    assert rows[(toy_runs.key("stopping"), "overall")]["rate_selected"] == "0.0%"


def test_each_suites_chart_draws_one_interval_per_run_and_rate(toy_runs: ToyRuns) -> None:
    index = (toy_runs.site / "index.html").read_text(encoding="utf-8")
    groups = group_sections(index)
    assert set(groups) == {"1", "2"}
    members = {"1": [toy_runs.key(n) for n in SAME_SETTINGS], "2": [toy_runs.key("fewer-calls")]}
    for number, section in groups.items():
        charts = re.findall(r'<div class="suite" data-suite="([^"]+)">.*?(<svg.*?</svg>)', section)
        assert [suite for suite, _ in charts] == ["toyworld_shelf", "overall"]
        for suite, svg in charts:
            drawn = re.findall(
                r'<line class="interval" data-run="([^"]+)" data-rate="(\w+)"'
                r' data-success="(\d+)" data-denominator="(\d+)" data-low="([^"]+)"'
                r' data-high="([^"]+)"',
                svg,
            )
            assert sorted((run, rate) for run, rate, *_ in drawn) == sorted(
                (run, rate) for run in members[number] for rate in ("selected", "completed")
            )
            for run, rate, success, denominator, low, high in drawn:
                name = next(n for n in RUNS if toy_runs.key(n) == run)
                report = toy_runs.report(name)
                tally = report["overall"] if suite == "overall" else report["suites"][suite]
                interval = tally[f"success_rate_over_{rate}_interval"]
                assert (int(success), int(denominator)) == (
                    tally["success"],
                    tally["selected" if rate == "selected" else "completed"],
                )
                assert (float(low), float(high)) == (interval["low"], interval["high"])


def test_every_pair_under_the_same_settings_is_compares_result(toy_runs: ToyRuns) -> None:
    index = (toy_runs.site / "index.html").read_text(encoding="utf-8")
    sections = pair_sections(index)
    keys = [toy_runs.key(name) for name in SAME_SETTINGS]
    assert set(sections) == {(keys[0], keys[1]), (keys[0], keys[2]), (keys[1], keys[2])}
    for (a, b), section in sections.items():
        name_a = next(n for n in RUNS if toy_runs.key(n) == a)
        name_b = next(n for n in RUNS if toy_runs.key(n) == b)
        done = toy_runs.compare(name_a, name_b, "--json")
        assert done.returncode == 0, done.stderr
        comparison = json.loads(done.stdout)
        rows = paired_rows(section)
        assert list(rows) == [*comparison["suites"], "overall"]
        for suite, tally in [*comparison["suites"].items(), ("overall", comparison["overall"])]:
            row = rows[suite]
            assert row["paired"] == str(tally["paired"])
            assert row["only_a"] == str(tally["only_a_succeeded"])
            assert row["only_b"] == str(tally["only_b_succeeded"])
            assert row["p_value"] == f"{tally['p_value']:.3g}"
            assert row["verdict"] == tally["verdict"]
            assert (
                row["a"] == f"{_percent(tally['a']['rate'])} ({_interval(tally['a']['interval'])})"
            )
    # The diagnostic actor against the one that stops: two discordant pairs for A.
    overall = paired_rows(sections[(keys[0], keys[1])])["overall"]
    assert (overall["only_a"], overall["only_b"], overall["p_value"]) == ("2", "0", "0.5")
    assert overall["verdict"].startswith("no difference detectable at the 5% level")


def test_a_run_under_other_settings_is_shown_apart_and_paired_only_on_request(
    toy_runs: ToyRuns, tmp_path: Path
) -> None:
    index = (toy_runs.site / "index.html").read_text(encoding="utf-8")
    apart = toy_runs.key("fewer-calls")
    groups = group_sections(index)
    assert f'data-run="{apart}"' in groups["2"] and f'data-run="{apart}"' not in groups["1"]
    assert "max policy calls (D): 3" in groups["2"] and "max policy calls (D): 4" in groups["1"]
    assert "shown apart and never paired" in index
    assert all(apart not in pair for pair in pair_sections(index))
    refused = toy_runs.compare("scripted", "fewer-calls")
    assert refused.returncode == 5  # compare refuses the same pair
    # On request, every pair, the differences named, as compare --allow-different-settings.
    out = tmp_path / "across"
    viewed = toy_runs.view(out, "--pair-across-settings")
    assert viewed.returncode == 0, viewed.stderr
    across = (out / "index.html").read_text(encoding="utf-8")
    sections = pair_sections(across)
    assert len(sections) == 6 and "shown apart and never paired" not in across
    section = sections[(toy_runs.key("scripted"), apart)]
    assert "settings differ (paired on request): max policy calls (D): A 4, B 3" in _text(section)
    allowed = toy_runs.compare("scripted", "fewer-calls", "--allow-different-settings", "--json")
    overall = json.loads(allowed.stdout)["overall"]
    assert paired_rows(section)["overall"]["verdict"] == overall["verdict"]


def test_latency_and_wall_time_are_the_counted_attempts(toy_runs: ToyRuns) -> None:
    index = (toy_runs.site / "index.html").read_text(encoding="utf-8")
    row = rate_rows(index)[(toy_runs.key("stopping"), "overall")]
    latencies: list[float] = []
    for attempt in sorted((toy_runs.runs["stopping"] / "episodes").iterdir()):
        served = read_log(AttemptPaths(attempt).events, kinds=("decision_served",)).records
        latencies += [float(r["latency_ms"]) for r in served]
    assert len(latencies) == 6  # two episodes of three policy calls
    ordered = sorted(latencies)
    median, p95 = statistics.median(latencies), ordered[round(0.95 * 5)]
    assert row["latency"] == (f"{readable_duration_ms(median)} / {readable_duration_ms(p95)} (n 6)")
    assert row["wall_time"].endswith("(n 2)")


def test_each_run_links_its_own_site_and_each_shared_case_both_attempts(
    toy_runs: ToyRuns, tmp_path: Path
) -> None:
    index = (toy_runs.site / "index.html").read_text(encoding="utf-8")
    for name, run_dir in toy_runs.runs.items():
        key = toy_runs.key(name)
        assert f'href="./runs/{key}/index.html"' in index
        # Today's single-run site, as `mailroom view RUN` writes it.
        alone = tmp_path / name
        assert run_cli("view", str(run_dir), "--out", str(alone), env=toy_runs.env).returncode == 0
        own = toy_runs.site / "runs" / key
        assert (own / "index.html").read_bytes() == (alone / "index.html").read_bytes()
        for page in alone.glob("attempts/*/index.html"):
            assert (own / page.relative_to(alone)).read_bytes() == page.read_bytes()
    cases = re.findall(r'<a class="case" href="(cases/[^"]+/index.html)">', index)
    assert len(cases) == 2
    for href in cases:
        page = (toy_runs.site / href).read_text(encoding="utf-8")
        columns = re.findall(r'<a class="attempt" href="([^"]+)">', page)
        assert len(columns) == 4  # every run holds every case of the plan
        for link in columns:
            assert (toy_runs.site / "cases" / Path(href).parent.name / link).resolve().is_file()


def test_an_actors_markup_is_escaped_on_the_side_by_side_page(toy_runs: ToyRuns) -> None:
    page = next((toy_runs.site / "cases").glob("*/index.html")).read_text(encoding="utf-8")
    assert "&lt;script&gt;window.__pwned = " in page
    assert "<script>window" not in page and "<img src=" not in page
    assert f'content="{CSP}"' in page


def test_several_runs_need_an_out_folder_and_distinct_runs(toy_runs: ToyRuns) -> None:
    a, b = toy_runs.runs["scripted"], toy_runs.runs["stopping"]
    missing = run_cli("view", str(a), str(b), env=toy_runs.env)
    assert missing.returncode == 2 and "several runs need --out DIR" in missing.stderr
    twice = run_cli("view", str(a), str(a), "--out", str(a.parent / "x"), env=toy_runs.env)
    assert twice.returncode == 2 and "given twice" in twice.stderr


def test_the_comparison_data_is_compare_and_report_in_process(tmp_path: Path) -> None:
    """Synthetic runs (no launch): the data reuses compare's comparison and the report."""
    a, _ = run_with_outcomes(tmp_path, "a", ["success", "success", "success", "failure"])
    b, _ = run_with_outcomes(tmp_path, "b", ["success", "failure", "error", "failure"])
    data = read_comparison([a.root, b.root])
    assert [run.key for run in data.runs] == ["1-run", "2-run"]  # make_run's folder name
    assert [len(group.runs) for group in data.groups] == [2]
    (pair,) = data.pairs
    assert pair.comparison == compare_runs(a.root, b.root)
    assert data.runs[0].report == build_report(a.root)
    assert data.runs[1].report.overall.errored == 1
    assert len(data.shared_cases) == 4
    assert data.runs[0].latency_ms["overall"].samples == 0  # no decision was served


def test_the_chart_draws_what_it_is_given_and_escapes_labels() -> None:
    full = wilson_interval(3, 4)
    rows = [
        ChartRow("1-a", "<b>a</b>", "selected", 3, 4, 0.75, full),
        ChartRow("1-a", "<b>a</b>", "completed", 0, 0, None, None),
    ]
    svg = wilson_chart("<title>", rows)
    assert svg.count('<line class="interval"') == 1 and "n/a (no case)" in svg
    assert "<b>" not in svg and "&lt;b&gt;a&lt;/b&gt; / selected" in svg
    assert 'aria-label="&lt;title&gt;"' in svg


def test_a_long_run_label_widens_its_column_and_is_cut_with_its_whole_text_kept() -> None:
    """A run's label never starts left of the chart: the label column is as wide as the
    longest label it shows, and a label past its cap is cut, its whole text a tooltip."""
    full = wilson_interval(3, 4)
    name = "scripted_diagnostic-20261206T133946Z-b953 (scripted_diagnostic)"
    short = [ChartRow("1-a", "a (p)", "selected", 3, 4, 0.75, full)]
    long = [ChartRow("2-b", name, "completed", 3, 4, 0.75, full)]

    def left_of(svg: str) -> float:
        found = re.search(r'<text class="run-label" x="([0-9.]+)"', svg)
        assert found is not None
        return float(found.group(1))

    def width_of(svg: str) -> int:
        found = re.search(r'viewBox="0 0 (\d+) ', svg)
        assert found is not None
        return int(found.group(1))

    narrow, wide = wilson_chart("t", short), wilson_chart("t", long)
    assert left_of(wide) > left_of(narrow) and width_of(wide) > width_of(narrow)
    shown = f"{name} / completed"[: MAX_LABEL_CHARS - 1] + "…"
    assert f"<title>{name} / completed</title>{shown}</text>" in wide
    # Its right-aligned end at x = left - 8 leaves room for every character shown.
    assert left_of(wide) - len(shown) * CHAR_PX >= 0


def test_the_served_comparison_rebuilds_while_a_launch_holds_a_run(tmp_path: Path) -> None:
    a, cases = run_with_outcomes(tmp_path, "a", ["success"])
    b, _ = run_with_outcomes(tmp_path, "b", ["failure"])
    with served_view(str(a.root), str(b.root), "--out", str(tmp_path / "site")) as url:
        with urllib.request.urlopen(url, timeout=10) as response:
            first = response.read().decode()
            assert response.headers["Content-Security-Policy"] == CSP
        assert first.count('<tr class="shared"') == 1 and "refresh" not in first
        with a.lock():  # as a launch holds it: rebuilt, and the index reloads itself
            write_result(a, cases[1], 1, outcome="success", executed=5, proprio=False)
            now = rebuilt_page(
                url,
                lambda page: (
                    RELOADS in page
                    and page.count('<tr class="shared"') == 1
                    and rate_rows(page)[("1-run", "overall")]["success"] == "2"
                ),
                "the live comparison was not rebuilt",
            )
        settled_page(url, now)  # rebuilt once more once the launch ends
        own = url.replace("index.html", "runs/1-run/index.html")
        with urllib.request.urlopen(own, timeout=10) as response:  # the run's own site
            assert response.read().decode().count('class="attempt"') == 2


@pytest.mark.usefixtures("undeclared")
def test_a_suites_groups_are_rated_and_paired(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """LIBERO-Para runs (made here, their cells named by each run's kept catalog): each
    cell's rates under its suite, and each pair's cells as compare pairs them."""
    for name in ("para-a", "para-b"):
        para_run(tmp_path, monkeypatch, name)
    runs = [tmp_path / "para-a", tmp_path / "para-b"]
    build_comparison_site(runs, tmp_path / "site")
    index = (tmp_path / "site" / "index.html").read_text(encoding="utf-8")
    rows = rate_rows(index)
    report = build_report(runs[0])
    for cell in CELLS:
        row = rows[("1-para-a", f"libero_para/{cell}")]
        tally = report.categories[f"libero_para/{cell}"]
        assert row["group"] == cell and row["selected"] == str(tally.selected)
        assert row["rate_selected"] == _percent(tally.success_rate_over_selected)
    comparison = compare_runs(*runs)
    paired = paired_rows(pair_sections(index)[("1-para-a", "2-para-b")])
    assert list(paired) == [*comparison.suites, *comparison.groups, "overall"]
    for key, pair in comparison.groups.items():
        assert paired[key]["verdict"] == pair.verdict
