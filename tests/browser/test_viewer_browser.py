"""`mailroom view` in a real browser: headless Chromium from Debian's packages, driven by
Playwright, on the site of a real small run (two LIBERO-10 episodes, an actor whose
note, invalid response and output are markup).

- The run page lists every attempt and filters them.
- An attempt page has one timeline entry per policy call, with the images delivered.
- Both videos load and play.
- The actor's markup is shown as text and runs nothing; no console errors.
- A screenshot of each page kind is kept (build/test-artifacts/) to be looked at.
- Each page fits 1280 pixels and shows no Python repr (tests/support/readable_pages.py).

Apart from the simulator: an attempt page of a run made here whose profile declares an
agent CLI's own account, with markup in a tool result, opened and unfolded; and the run
and attempt pages of a run whose provider usage the gateway metered, a model name its
provider gave as markup shown as text.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import browser_pages
import pytest
from browser_pages import Page
from conftest import cli_plan, copied_actor, launch_command, mailroom_exe
from mailroom.benchmarks.libero.specs import LIBERO_OBSERVATION
from mailroom.orchestrator.episode.video import EpisodeVideo
from mailroom.orchestrator.sim.fake import synthetic_capture
from mailroom.orchestrator.viewer.account_section import ACCOUNT_LABEL
from mailroom.orchestrator.viewer.site import build_site
from metered_runs import HOSTILE_MODEL, usage_site
from readable_pages import assert_reads_like_pages
from traced_runs import claude_episode, traced_run

CAMERAS = LIBERO_OBSERVATION.cameras

# A fixture of tests/support, used by name.
browser = browser_pages.browser

STOPPING = "libero_10-t000-i00-o0-s20260907-a1"  # the alphabet soup task: stops at call 4


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory, module_mailbox_root: Path) -> Path:
    base = tmp_path_factory.mktemp("viewer")
    actor = copied_actor(base / "actors", "markup_actor.py")
    plan = cli_plan(base / "plan.json", "fast", "--task-ids", "0,1")
    run_dir = base / "run"
    launched = subprocess.run(
        [
            *launch_command(
                plan, run_dir, module_mailbox_root / "view", f"python3 {actor} {{endpoint}}"
            ),
            *("--max-policy-calls", "5", "--json"),
        ],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert launched.returncode == 0, launched.stderr[-3000:]
    out = base / "site"
    made = subprocess.run(
        [mailroom_exe(), "view", str(run_dir), "--out", str(out)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert made.returncode == 0, made.stderr
    return out


# Plays each video of the page and waits for its playback position to move (the
# `timeupdate` event), within a generous bound: what each did, in page order.
PLAY_EACH_VIDEO = """async () => {
    const out = [];
    for (const video of document.querySelectorAll("video")) {
        video.muted = true;
        const moved = new Promise((done) => {
            const check = () => { if (video.currentTime > 0) done(true); };
            video.addEventListener("timeupdate", check);
            video.addEventListener("ended", check);
            check();
        });
        const bound = new Promise((done) => setTimeout(() => done(false), 30000));
        await video.play();
        const advanced = await Promise.race([moved, bound]);
        out.push({advanced, ready: video.readyState, time: video.currentTime,
                  error: video.error && video.error.code});
    }
    return out;
}"""


def _played(video: dict[str, Any]) -> bool:
    return bool(
        video["advanced"] and video["ready"] >= 2 and video["time"] > 0 and video["error"] is None
    )


def test_the_run_page_lists_every_attempt_and_filters_them(site: Path, browser: Any) -> None:
    view = Page(browser, (site / "index.html").as_uri())
    rows = view.page.locator("tr.attempt")
    assert rows.count() == 2
    links = sorted(rows.locator("a").all_inner_texts())
    assert links == [STOPPING, "libero_10-t001-i00-o0-s20260907-a1"]
    assert "Wilson 95%" in view.page.locator("table.suites").inner_text()
    view.page.select_option('select[data-filter="termination"]', "actor_stop")
    assert view.page.locator("tr.attempt:not(.hidden)").count() == 1
    assert view.page.locator("#shown").inner_text() == "1"
    view.page.select_option('select[data-filter="termination"]', "")
    assert view.page.locator("tr.attempt:not(.hidden)").count() == 2
    assert view.errors() == []
    assert view.keep("viewer-run-page.png").stat().st_size > 10_000


def test_an_attempt_page_shows_each_policy_call_and_both_videos_play(
    site: Path, browser: Any
) -> None:
    attempt = site / "attempts" / STOPPING
    result = json.loads((site.parent / "run" / "episodes" / STOPPING / "result.json").read_text())
    assert result["counters"]["policy_calls"] == 4 and result["termination"] == "actor_stop"
    view = Page(browser, (attempt / "index.html").as_uri())
    entries = view.page.locator("section.decision")
    assert entries.count() == 4
    verdicts = entries.locator(".verdict").all_inner_texts()
    assert verdicts == ["accepted", "rejected", "accepted", "stop"]
    # The rejected call's feedback, as the next observation showed it.
    after = entries.nth(1).locator("pre.untrusted").last.inner_text()
    assert "issues" in after
    # The images exactly as delivered: the page's copies are the run's files.
    images = view.page.locator("section.decision img")
    assert images.count() == 8
    for i in range(images.count()):
        assert (
            view.page.evaluate("(img) => img.naturalWidth", images.nth(i).element_handle()) == 256
        )
    for name in (attempt / "observations").iterdir():
        delivered = site.parent / "run" / "episodes" / STOPPING / "observations" / name.name
        assert name.read_bytes() == delivered.read_bytes()
    played = view.page.evaluate(PLAY_EACH_VIDEO)
    assert len(played) == 2
    assert all(_played(v) for v in played), played
    assert view.page.locator("svg.actions polyline").count() == 7
    assert view.errors() == []
    assert view.keep("viewer-attempt-page.png").stat().st_size > 10_000


def test_an_actors_markup_is_shown_as_text_and_runs_nothing(site: Path, browser: Any) -> None:
    view = Page(browser, (site / "attempts" / STOPPING / "index.html").as_uri())
    assert view.page.evaluate("() => window.__pwned === undefined")
    # The note's markup appears as text in the raw response, the actor's output and
    # nowhere as an element.
    texts = " ".join(view.page.locator("pre.untrusted").all_inner_texts())
    assert texts.count("<script>window.__pwned = ") >= 4  # two responses, both outputs
    assert "onerror=" in texts
    assert view.page.locator("img[onerror]").count() == 0
    assert view.page.locator("body script").count() == 0
    assert view.page.locator("img[src='x']").count() == 0
    assert view.errors() == []


def test_the_run_pages_read_like_pages_at_1280_pixels(site: Path, browser: Any) -> None:
    """No overflow, no Python repr outside the actor's words, the chart's label clear:
    tests/support/readable_pages.py's checks, on this run's pages."""
    assert len(assert_reads_like_pages(browser, site, "libero")) == 3


HOSTILE = '<script>alert(1)</script><img src=x onerror="window.__pwned = 1; alert(2)">'


def test_the_agents_own_account_unfolds_under_each_call_as_text_and_runs_nothing(
    tmp_path: Path, browser: Any
) -> None:
    root, directory = traced_run(tmp_path, "claude_stream_json", claude_episode(HOSTILE))
    build_site(root, tmp_path / "site")
    view = Page(browser, (tmp_path / "site" / "attempts" / directory.name / "index.html").as_uri())
    held = view.page.locator("table.identity tr", has=view.page.locator("th", has_text="simulator"))
    assert held.locator("td").inner_text() == "dedicated"  # how its simulator was held
    calls = view.page.locator("section.decision")
    assert calls.count() == 2
    for i in range(2):
        summary = calls.nth(i).locator("details.account > summary")
        assert summary.inner_text() == ACCOUNT_LABEL
    second = calls.nth(1).locator("details.account")
    assert not second.locator("pre.untrusted").first.is_visible()  # folded until opened
    second.locator("summary").click()
    shown = second.locator("pre.untrusted")
    assert shown.first.is_visible()
    texts = shown.all_inner_texts()
    assert "cat outbox/obs-2.json" in texts and HOSTILE in texts
    assert view.page.evaluate("() => window.__pwned === undefined")
    assert view.page.locator("img[src='x']").count() == 0
    assert view.page.locator("img[onerror]").count() == 0
    assert view.page.locator("body script").count() == 0
    assert view.errors() == []
    assert view.keep("viewer-agent-account.png").stat().st_size > 10_000


def test_the_metered_usage_is_shown_and_a_models_markup_is_text(
    tmp_path: Path, browser: Any
) -> None:
    _, cases, out = usage_site(tmp_path)
    run = Page(browser, (out / "index.html").as_uri())
    overall = run.page.locator("table.usage tr", has=run.page.locator("td", has_text="overall"))
    assert overall.locator("td").all_inner_texts() == [
        *("overall", "3 of 5", "6", "7,000", "400", "n/a"),
        *("$0.015 (n 2)", "n/a (n 1)"),
    ]
    models = run.page.locator("table.usage-models tbody tr td:first-child").all_inner_texts()
    assert models == [HOSTILE_MODEL, "claude-test-1"]  # the markup as text, in a cell
    coverage = run.page.locator("p.usage-coverage").inner_text()
    assert coverage.startswith("provider usage: metered by the provider gateway in 3 of 5")
    assert run.page.locator("body script").count() == 0
    assert run.errors() == []  # no dialog: the model's <script> never ran
    assert run.keep("viewer-usage-run-page.png").stat().st_size > 10_000

    attempt = Page(browser, (out / "attempts" / cases[0].attempt_id(1) / "index.html").as_uri())
    cost = attempt.page.locator(
        "table.usage tr", has=attempt.page.locator("th", has_text="cost (USD)")
    )
    assert cost.locator("td").inner_text() == "$0.03"
    decision = attempt.page.locator("section.decision").first
    assert decision.locator(".provider-time").inner_text() == (
        "1.2 s (78% of latency), 2 request(s)"
    )
    rows = attempt.page.locator("table.usage-decisions tbody tr")
    assert rows.nth(1).locator("td").all_inner_texts()[:5] == [
        *("policy call 1", "2", "1.2 s", "1.6 s", "78%"),
    ]
    assert attempt.errors() == []
    hostile = Page(browser, (out / "attempts" / cases[1].attempt_id(1) / "index.html").as_uri())
    named = hostile.page.locator("table.usage-models tbody tr td:first-child").all_inner_texts()
    assert named == [HOSTILE_MODEL, "claude-test-1"]
    assert hostile.page.locator("body script").count() == 0 and hostile.errors() == []
    # Every page of the site fits 1280 pixels and shows no Python repr.
    assert len(assert_reads_like_pages(browser, out, "usage")) == 6


def test_a_video_the_recorder_wrote_plays_in_the_browser(tmp_path: Path, browser: Any) -> None:
    """Apart from the simulator: the recorder's MP4s of synthetic frames, on a page of
    their own, play (their position moves) once the browser says so, not after a guess."""
    with EpisodeVideo(tmp_path, CAMERAS) as video:
        for control in range(20):
            video.add(synthetic_capture(control).images)
        written = video.finish()
    sources = "".join(
        f'<video src="{record.file}" preload="auto"></video>' for record in written.values()
    )
    (tmp_path / "index.html").write_text(f"<!doctype html><body>{sources}</body>")
    view = Page(browser, (tmp_path / "index.html").as_uri())
    played = view.page.evaluate(PLAY_EACH_VIDEO)
    assert len(played) == len(CAMERAS) and all(_played(v) for v in played), played
    assert view.errors() == []
