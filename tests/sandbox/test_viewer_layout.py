"""`mailroom view` read as a page, in a real browser (Debian's Chromium through Playwright)
at 1280x800: the run page and every attempt page of a real run fit the window (nothing
wider than it outside a box meant to scroll), their text shows no Python repr (`True`,
`None`, `{'...`) and no long duration in ms outside what an actor wrote, and the action
chart's legend does not cover its native-success label. A screenshot of each page is kept
in build/test-artifacts/.

The runs: the toy family's (tests/support/toy_family: a real `mailroom launch` of its sandboxed
diagnostic actor on a fake simulator, no LIBERO), and a synthetic traced run whose decision
took minutes; tests/browser/test_viewer_browser.py checks its LIBERO run's pages the same way.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import browser_pages
import toy_family_runs
from conftest import run_cli
from mailroom.orchestrator.viewer.site import build_site
from readable_pages import assert_reads_like_pages, reprs
from traced_runs import claude_episode, traced_run

# Fixtures of tests/support, used by name.
browser = browser_pages.browser
toy_env = toy_family_runs.toy_env
toy_run = toy_family_runs.toy_run


def test_the_toy_runs_pages_read_like_pages(
    browser: Any, toy_env: dict[str, str], toy_run: Path
) -> None:
    out = toy_run.parent / "readable-site"
    viewed = run_cli("view", str(toy_run), "--out", str(out), env=toy_env)
    assert viewed.returncode == 0, viewed.stderr
    found = assert_reads_like_pages(browser, out, "toy")
    assert len(found) == 3
    # Both attempts succeeded natively: their charts carry the label the legend must
    # leave clear (checked above).
    labels = [seen["chart"]["label"] for key, seen in found.items() if key != "run"]
    assert len(labels) == 2 and all(labels)


def test_a_slow_decision_and_absent_values_read_like_a_page(browser: Any, tmp_path: Path) -> None:
    """A decision served after three minutes, a run with no network recorded for its
    confinement and no episode wall time: words and minutes, not `None` and ms; a task
    name of 271 characters without a space breaks rather than widen the page."""
    root, directory = traced_run(
        tmp_path, "claude_stream_json", claude_episode("True None {'a': 1}")
    )
    with (directory / "events.jsonl").open("a") as events:
        served = {"latency_ms": 178392.0, "queue_delay_ms": 0.42, "processing_ms": 178391.5}
        events.write(
            json.dumps({"t": 2.0, "event": "decision_served", "sequence": 2, **served}) + "\n"
        )
    result = json.loads((directory / "result.json").read_text())
    result["case"]["task_name"] = "LIVING_ROOM_SCENE2_" + "put_it_in_the_basket_" * 12  # 271
    (directory / "result.json").write_text(json.dumps(result))
    manifest = json.loads((root / "manifest.json").read_text())
    assert manifest["confinement"]["network"] is None  # the page must say so in words
    build_site(root, tmp_path / "site")
    found = assert_reads_like_pages(browser, tmp_path / "site", "slow")
    shown = found[directory.name]["shown"]
    assert (
        "2 min 58 s" in shown and "0.4 ms" in shown and "network unknown" in found["run"]["shown"]
    )
    # What the actor wrote stays as it wrote it (escaped, shown as text), reprs and all:
    # the check above left it out, and would have seen it.
    assert "True None {'a': 1}" in shown and reprs(shown)
