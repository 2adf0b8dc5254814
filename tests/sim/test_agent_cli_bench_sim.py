"""`mailroom bench --only-agent-clis` as a user runs it, small: two live confined Claude
Code episodes on LIBERO against the project's stand-in provider (thinking half a second
per request), beside two of the tiny diagnostic actor. Every figure the section prints
is measured from the run (no figure missing, the counts agree with the episodes run),
and the JSON carries the headline keys the targets are on."""

from __future__ import annotations

import json
import os
import subprocess

import pytest
from conftest import mailroom_exe
from mailroom.orchestrator.perf.agent_cli_bench import HEADLINE_FIGURES

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="an actor's network namespace needs root")

EPISODES = 2
DECISIONS = 2


def test_the_agent_cli_section_measures_live_claude_code_episodes_beside_the_tiny_actor() -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("ANTHROPIC_")}
    ran = subprocess.run(
        [
            *(mailroom_exe(), "bench", "--only-agent-clis", "--json"),
            *("--agent-episodes", str(EPISODES), "--agent-think", "0.5"),
            *("--agent-decisions", str(DECISIONS), "--agent-cli", "claude_code"),
        ],
        capture_output=True,
        text=True,
        env=env,
        timeout=900,
    )
    assert ran.returncode == 0, ran.stderr[-3000:]
    figures = json.loads(ran.stdout)
    for key in HEADLINE_FIGURES:
        assert f"claude_code_{key}" in figures, key
    runs = figures["details"]["agent_clis"]["runs"]
    assert sorted(runs) == ["claude_code", "tiny"]
    for name, run in runs.items():
        assert run["episodes"] == EPISODES and run["rejected_responses"] == 0, run
        assert "error" not in run["outcomes"] and run["errored"] == 0, run
        # Each episode acted DECISIONS times and stopped: at least that many policy calls.
        assert run["decisions"] >= EPISODES * (DECISIONS + 1), run
        assert 1 <= run["most_live"] <= EPISODES, run
        assert run["bound_by"] in ("the plan", "memory", "admission's check of the cores")
        for key in (
            "actor_cgroup_peak_mb_p50",
            "actor_cgroup_mb_p50",
            "actor_rss_mb_p50",
            "worker_mb_per_live_episode",
            "agent_cpu_s_per_decision",
            "evaluator_cpu_s_per_decision",
            "evaluator_share_of_machine",
            "queue_delay_ms_p50",
            "queue_delay_ms_p95",
            "episodes_per_hour",
        ):
            assert isinstance(run[key], (int, float)) and run[key] >= 0, (name, key, run)
        assert run["actor_cgroup_peak_mb_p50"] > 0 and run["agent_cpu_s_per_decision"] > 0
    claude = runs["claude_code"]
    # The CLI asked its (stood-in) model at least once per decision, through the gateway.
    assert claude["model_requests"] >= claude["decisions"] - EPISODES
    # Node's runtime holds far more than the tiny Python actor: a ratio that cannot be 1.
    assert claude["over_tiny"]["actor_cgroup_peak_mb_p50"] > 2, claude["over_tiny"]
    assert figures["claude_code_most_live"] == claude["most_live"]
