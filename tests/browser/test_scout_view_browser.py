"""An ATIF export opened in an agent-trajectory tool's viewer, in a real browser: the
export of a real run (the toy family's agent-like actor asking a stand-in provider
through the provider gateway, tests/support/accounted_runs.py) imported with Inspect
Scout's own command (`scout import atif`, its client venv) and shown by `scout view`,
driven by Playwright in Debian's chromium.

- The viewer lists one transcript per attempt.
- A transcript shows the attempt's id, its agent and its messages: the launch message,
  the observation delivered, the agent's own tool calls and the responses.
- The agent's markup is shown as text and runs nothing; no page error.
- A screenshot is kept (build/test-artifacts/) to be looked at.
"""

from __future__ import annotations

import json
import socket
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import browser_pages
import pytest
import toy_family_runs
from accounted_runs import ATTEMPTS, launch_accounted_run
from browser_pages import Page
from client_venvs import client_env, client_program
from conftest import run_cli
from mailroom.orchestrator.perf.provider_standin.anthropic_standin import AnthropicStandIn

CLIENT = "inspect_scout"
MARKUP = "<script>alert('account')</script>"  # what the actor says in its account

# Fixtures of tests/support, used by name.
browser = browser_pages.browser
toy_env = toy_family_runs.toy_env


@pytest.fixture(scope="module")
def transcripts(
    toy_env: dict[str, str], tmp_path_factory: pytest.TempPathFactory, module_mailbox_root: Path
) -> Path:
    """The run's ATIF export imported by `scout import atif` into a transcripts folder."""
    base = tmp_path_factory.mktemp("scout-view")
    with AnthropicStandIn() as provider:
        run_dir, env = launch_accounted_run(
            base, toy_env, provider.origin, module_mailbox_root / "scout"
        )
    out = base / "atif"
    exported = run_cli("export", str(run_dir), "--format", "atif", "--out", str(out), env=env)
    assert exported.returncode == 0, exported.stderr
    folder = base / "transcripts"
    scout = str(client_program(CLIENT, "scout"))
    imported = subprocess.run(
        [scout, "import", "atif", "-P", f"path={out}", "-T", str(folder)],
        capture_output=True,
        text=True,
        timeout=300,
        env=client_env(base / "scout"),
    )
    assert imported.returncode == 0, imported.stdout + imported.stderr
    assert "Import complete" in imported.stdout, imported.stdout
    return folder


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


@pytest.fixture(scope="module")
def viewer(transcripts: Path) -> Iterator[str]:
    """`scout view` on the transcripts for the module: the address it serves. What it
    prints goes to a file (a pipe nobody reads could fill and stop it)."""
    port = _free_port()
    scout = str(client_program(CLIENT, "scout"))
    log = transcripts.parent / "scout-view.log"
    with log.open("w") as output:
        server = subprocess.Popen(
            [scout, "view", "-T", str(transcripts), "--host", "127.0.0.1", "--port", str(port)],
            stdout=output,
            stderr=subprocess.STDOUT,
            env=client_env(transcripts.parent / "scout"),
        )
    try:
        deadline = time.monotonic() + 120
        while f"Running on http://127.0.0.1:{port}" not in log.read_text():
            assert server.poll() is None, f"scout view ended: {log.read_text()[-2000:]}"
            assert time.monotonic() < deadline, f"scout view never served: {log.read_text()}"
            time.sleep(0.2)
        yield f"http://127.0.0.1:{port}/"
    finally:
        server.terminate()
        server.wait(timeout=20)


def test_scout_s_viewer_lists_each_attempt_and_shows_its_messages(
    viewer: str, transcripts: Path, browser: object
) -> None:
    page = Page(browser, viewer)
    page.page.get_by_text(f"{len(ATTEMPTS)} items").wait_for(timeout=30_000)
    page.keep("scout-view-list.png")
    rows = page.page.get_by_role("row")
    rows.nth(1).click()  # the first transcript (row 0 is the header)
    header = page.page.get_by_text("TRANSCRIPT —")
    header.wait_for(timeout=30_000)
    shown = header.inner_text().split("—", 1)[1].strip()
    run_id, attempt = shown.split(":", 1)  # named by its run and attempt
    manifest = json.loads((transcripts.parent / "run" / "manifest.json").read_text())
    assert run_id == manifest["run_id"] and attempt in ATTEMPTS
    # With model events the events come first; the messages are the next tab.
    page.page.locator("#transcript-messages").click()
    page.page.get_by_text("SYSTEM").first.wait_for(timeout=30_000)
    text = page.page.inner_text("body")
    assert "accounted_agent" in text
    assert "You are controlling a simulated robot arm" in text  # the launch message
    assert "outbox/obs-1.json" in text  # the agent's own tool call
    trajectory = json.loads((transcripts.parent / "atif" / attempt / "trajectory.json").read_text())
    responses = [
        json.loads(step["message"])
        for step in trajectory["steps"]
        if step["extra"]["mailroom"]["kind"] == "response"
    ]
    assert responses and all(r["request_id"] in text for r in responses)  # each response
    page.keep("scout-view-transcript.png")
    # The agent's words are data: shown as text, never run.
    page.page.get_by_text(MARKUP).first.wait_for(timeout=30_000)
    assert page.errors() == []
