"""`mailroom view RUN_A RUN_B ...` in a real browser: Debian's Chromium through Playwright,
on the comparison site of four real toy-family runs (tests/support/toy_comparison_runs.py,
no LIBERO; tests/sandbox/test_viewer_comparison.py checks the same site's data).

- The index loads with a Wilson chart per settings group and suite, one interval per run
  and rate, and shows each run's report and each pair's comparison as the CLI's JSON does.
- Its links lead to each run's own site and to a shared case's attempts side by side,
  and from there to each attempt's own page.
- An actor's note that is markup shows as text and runs nothing; no console errors.
- The run under other protocol settings is shown apart and paired with none.
A screenshot of the index and of a side-by-side page is kept (build/test-artifacts/).
"""

from __future__ import annotations

import json
import re
from typing import Any

import browser_pages
import toy_comparison_runs
import toy_family_runs
from browser_pages import Page
from toy_comparison_runs import SAME_SETTINGS, ToyRuns

# Fixtures of tests/support, used by name.
browser = browser_pages.browser
toy_env = toy_family_runs.toy_env
toy_runs = toy_comparison_runs.toy_runs

# The markup actor's note as its raw response holds it (a JSON string: quotes escaped).
NOTE = '<script>window.__pwned = \\"script\\"</script><img src=\\"x\\" onerror='


def _percent(rate: float | None) -> str:
    return "n/a" if rate is None else f"{rate:.1%}"


def _interval(interval: dict[str, float] | None) -> str:
    return "n/a" if interval is None else f"{interval['low']:.1%} to {interval['high']:.1%}"


def _index(toy_runs: ToyRuns, browser: Any) -> Page:
    return Page(browser, (toy_runs.site / "index.html").as_uri())


def test_the_index_loads_with_its_charts_and_the_clis_numbers(
    toy_runs: ToyRuns, browser: Any
) -> None:
    view = _index(toy_runs, browser)
    page = view.page
    assert page.locator("svg.wilson").count() == 4  # two groups, each a suite and overall
    members = {"1": len(SAME_SETTINGS), "2": 1}
    for number, runs in members.items():
        group = page.locator(f'section.group[data-group="{number}"]')
        for suite in ("toyworld_shelf", "overall"):
            chart = group.locator(f'div.suite[data-suite="{suite}"] svg.wilson')
            assert chart.is_visible()
            for rate in ("selected", "completed"):
                drawn = chart.locator(f'line.interval[data-rate="{rate}"]')
                assert drawn.count() == runs, (number, suite, rate)
                assert chart.locator(f'circle.rate[data-rate="{rate}"]').count() == runs
    for name in toy_runs.runs:
        report = toy_runs.report(name)
        for suite, tally in [*report["suites"].items(), ("overall", report["overall"])]:
            row = page.locator(f'tr.rate[data-run="{toy_runs.key(name)}"][data-suite="{suite}"]')
            expected = {
                "selected": str(tally["selected"]),
                "completed": str(tally["completed"]),
                "success": str(tally["success"]),
                "rate_selected": _percent(tally["success_rate_over_selected"]),
                "interval_selected": _interval(tally["success_rate_over_selected_interval"]),
                "rate_completed": _percent(tally["success_rate_over_completed"]),
                "interval_completed": _interval(tally["success_rate_over_completed_interval"]),
            }
            shown = {
                field: row.locator(f'td[data-field="{field}"]').inner_text() for field in expected
            }
            assert shown == expected, (name, suite)
    a, b = toy_runs.key("scripted"), toy_runs.key("stopping")
    compared = toy_runs.compare("scripted", "stopping", "--json")
    assert compared.returncode == 0, compared.stderr
    overall = json.loads(compared.stdout)["overall"]
    row = page.locator(f'section.pair[data-a="{a}"][data-b="{b}"] tr.paired[data-suite="overall"]')
    assert row.locator('td[data-field="p_value"]').inner_text() == f"{overall['p_value']:.3g}"
    assert row.locator('td[data-field="verdict"]').inner_text() == overall["verdict"]
    # No Python repr: the index holds nothing an actor wrote, so none anywhere in its text.
    assert not re.search(r"\b(?:True|False|None)\b|\{'|\['", page.locator("body").inner_text())
    width = page.evaluate("() => [document.documentElement.scrollWidth, window.innerWidth]")
    assert width[0] <= width[1], width  # nothing wider than a 1280-pixel window
    # Every run's label lies inside its chart, none cut at the left edge; each settings
    # group says the chunk its runs allowed, never a dash for a null that meant K.
    lefts = page.evaluate(
        "() => Array.from(document.querySelectorAll('svg.wilson text.run-label'))"
        ".map(t => t.getBBox().x)"
    )
    assert lefts and min(lefts) >= 0, lefts
    for line in page.locator("p.settings").all_inner_texts():
        assert "max chunk: —" not in line and "max chunk: " in line, line
    assert view.errors() == []
    assert view.keep("viewer-comparison-index.png").stat().st_size > 10_000


def test_links_lead_to_each_runs_site_and_a_cases_attempts_side_by_side(
    toy_runs: ToyRuns, browser: Any
) -> None:
    view = _index(toy_runs, browser)
    page = view.page
    page.locator("table.runs a.run-site").first.click()
    page.wait_for_load_state("load")
    assert page.url.endswith(f"/runs/{toy_runs.key('scripted')}/index.html")
    assert page.locator("h1").inner_text() == "scripted"  # the run's own page
    assert page.locator("tr.attempt").count() == 2
    page.go_back()
    page.wait_for_load_state("load")
    page.locator("a.case").first.click()
    page.wait_for_load_state("load")
    columns = page.locator("div.attempt-column")
    assert columns.count() == len(toy_runs.runs)
    markup = columns.filter(has=page.locator(f'a.run-site:text-is("{toy_runs.key("markup")}")'))
    attempt = markup.locator("a.attempt")
    attempt_id = attempt.inner_text()
    width = page.evaluate("() => [document.documentElement.scrollWidth, window.innerWidth]")
    assert width[0] <= width[1], width  # the columns share a 1280-pixel window
    assert view.keep("viewer-comparison-case.png").stat().st_size > 10_000
    attempt.click()
    page.wait_for_load_state("load")
    assert page.locator("h1").inner_text() == attempt_id  # the attempt's own page
    assert page.locator("section.decision").count() >= 1
    assert view.errors() == []


def test_an_actors_markup_shows_as_text_on_the_side_by_side_page(
    toy_runs: ToyRuns, browser: Any
) -> None:
    index = _index(toy_runs, browser)
    href = index.page.locator("a.case").first.get_attribute("href")
    assert href is not None
    view = Page(browser, (toy_runs.site / href).as_uri())
    texts = " ".join(view.page.locator("pre.untrusted").all_inner_texts())
    assert NOTE in texts
    assert view.page.evaluate("() => window.__pwned === undefined")
    assert view.page.locator("img[src='x']").count() == 0
    assert view.page.locator("img[onerror]").count() == 0
    assert view.page.locator("body script").count() == 0
    assert view.errors() == [] and index.errors() == []


def test_a_run_under_other_settings_is_shown_apart_and_unpaired(
    toy_runs: ToyRuns, browser: Any
) -> None:
    view = _index(toy_runs, browser)
    page = view.page
    apart = toy_runs.key("fewer-calls")
    second = page.locator('section.group[data-group="2"] tr.rate')
    assert {second.nth(i).get_attribute("data-run") for i in range(second.count())} == {apart}
    assert page.locator(f'section.group[data-group="1"] tr.rate[data-run="{apart}"]').count() == 0
    assert page.locator("section.pair").count() == 3
    unpaired = f'section.pair[data-a="{apart}"], section.pair[data-b="{apart}"]'
    assert page.locator(unpaired).count() == 0
    assert page.locator("p.apart").is_visible()
    assert view.errors() == []
