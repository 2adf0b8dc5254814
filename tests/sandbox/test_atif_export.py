"""`mailroom export --format atif` on a real run: the toy family launched with a real
`mailroom launch`, recorded `full`, its sandboxed agent-like actor asking a stand-in
Anthropic provider through the real provider gateway with a stand-in key and printing
its own account as Claude Code does (`actors/accounted_agent_actor.py`). Each trajectory
is held to Harbor's own ATIF models and validator (`harbor`, pinned in
requirements/harbor.txt) and compared with the run's records:

- the launch message, then each observation delivered (the document byte for byte, its
  image copied beside the trajectory as delivered), the agent's account placed at its
  policy call and marked unverified, each response verbatim with its verdict, latency,
  the answering model and the gateway's metered tokens (which add up to the result's),
  and the end of the episode;
- no key and no path of this machine in any file of any export format (ATIF, Parquet,
  Rerun, LeRobot) of that run;
- `--attempt` exports one; an unknown attempt or a destination holding something else is
  a usage error (exit 2); an attempt whose image is not the one delivered, or whose
  requests file disagrees with its result, is skipped and listed (exit 4) while the
  others are exported.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import toy_family_runs
from accounted_runs import ATTEMPTS, KEY, launch_accounted_run
from client_venvs import assert_installed_as_locked
from conftest import REPO, assert_usage_error, leaks_under, run_cli
from harbor.models.trajectories import Trajectory
from harbor.utils.trajectory_validator import TrajectoryValidator
from locked_packages import SCOUT_LOCKS
from mailroom.orchestrator.perf.provider_standin.anthropic_standin import AnthropicStandIn
from mailroom.timestamps import utc_timestamp
from recorded_events import attempt_events
from scout_client import assert_transcript_is_its_trajectory, import_with_inspect_scout

FIRST = ATTEMPTS[0]

# A fixture of tests/support, used by name.
toy_env = toy_family_runs.toy_env


@pytest.fixture(scope="module")
def provider() -> Iterator[AnthropicStandIn]:
    with AnthropicStandIn() as standin:
        yield standin


@pytest.fixture(scope="module")
def run(
    toy_env: dict[str, str],
    provider: AnthropicStandIn,
    tmp_path_factory: pytest.TempPathFactory,
    module_mailbox_root: Path,
) -> tuple[Path, dict[str, str]]:
    base = tmp_path_factory.mktemp("atif")
    return launch_accounted_run(base, toy_env, provider.origin, module_mailbox_root / "atif")


def _export(run_dir: Path, env: dict[str, str], *options: str) -> subprocess.CompletedProcess[str]:
    return run_cli("export", str(run_dir), "--format", "atif", "--json", *options, env=env)


def _trajectory(path: Path) -> dict[str, Any]:
    """The trajectory at `path`, held to Harbor's validator (its images included)."""
    validator = TrajectoryValidator()
    assert validator.validate(path), validator.get_errors()
    document: dict[str, Any] = json.loads(path.read_text())
    Trajectory.model_validate(document)
    return document


def _kind(step: dict[str, Any]) -> str:
    return str(step["extra"]["mailroom"]["kind"])


def test_each_attempt_is_a_valid_trajectory_of_its_records(
    run: tuple[Path, dict[str, str]], provider: AnthropicStandIn
) -> None:
    run_dir, env = run
    exported = _export(run_dir, env)
    assert exported.returncode == 0, exported.stderr
    summary = json.loads(exported.stdout)
    out = Path(summary["out"])
    assert out == run_dir / "export" / "atif"
    attempts = sorted(p.name for p in (run_dir / "episodes").iterdir())
    assert [t["attempt_id"] for t in summary["trajectories"]] == attempts
    assert summary["skipped"] == []
    index = json.loads((out / "index.json").read_text())
    assert index["format"] == "mailroom.atif/v2" and index["atif_version"] == "ATIF-v1.7"

    metered = 0
    manifest = json.loads((run_dir / "manifest.json").read_text())
    for entry in summary["trajectories"]:
        attempt = run_dir / "episodes" / entry["attempt_id"]
        result = json.loads((attempt / "result.json").read_text())
        document = _trajectory(out / entry["file"])
        steps = document["steps"]
        assert [s["step_id"] for s in steps] == list(range(1, len(steps) + 1))
        named = f"{manifest['run_id']}:{entry['attempt_id']}"  # unique across runs of a plan
        assert document["session_id"] == document["trajectory_id"] == named
        agent = document["agent"]
        assert agent["name"] == "accounted_agent" and agent["model_name"] == "claude-haiku-4-5"
        assert agent["extra"]["mailroom"]["model_verified"] is True

        # The launch message first, the end last.
        launch = json.loads((attempt / "launch_message.json").read_text())
        assert _kind(steps[0]) == "launch_message" and steps[0]["source"] == "system"
        [started] = [e for e in attempt_events(attempt) if e["event"] == "actor_started"]
        assert steps[0]["timestamp"] == utc_timestamp(started["t"])
        assert "<endpoint>" in steps[0]["message"]
        assert steps[0]["message"].count("<endpoint>") == launch["instructions"].count(
            json.loads((attempt / "endpoint.json").read_text())["endpoint"]
        )
        assert _kind(steps[-1]) == "episode_end"
        assert steps[-1]["extra"]["mailroom"]["outcome"] == result["outcome"]

        # Each observation as delivered, with its image; each response verbatim.
        observations = [s for s in steps if _kind(s) == "observation"]
        responses = [s for s in steps if _kind(s) == "response"]
        claimed = [e for e in attempt_events(attempt) if e["event"] == "response_claimed"]
        assert len(observations) == result["counters"]["policy_calls"] == len(claimed)
        assert len(responses) == len(claimed)
        for step in observations:
            n = step["extra"]["mailroom"]["sequence"]
            text, image = step["message"]
            assert text["text"] == (attempt / "observations" / f"obs-{n}.json").read_text()
            copied = out / entry["attempt_id"] / image["source"]["path"]
            delivered = attempt / "observations" / f"obs-{n}-overhead.png"
            assert copied.read_bytes() == delivered.read_bytes()
        for step in responses:
            n = step["extra"]["mailroom"]["sequence"]
            assert step["message"] == (attempt / "responses" / f"resp-{n}.json").read_text()
            assert step["extra"]["mailroom"]["verdict"].startswith("accepted")
            assert step["model_name"] == "claude-haiku-4-5" and step["llm_call_count"] == 1
            assert step["extra"]["mailroom"]["latency_ms"] > 0

        # The gateway's figures: per decision, adding up to the result's.
        usage = result["usage"]
        prompt = usage["input_tokens"] + usage["cache_read_tokens"] + usage["cache_write_tokens"]
        assert sum(s["metrics"]["prompt_tokens"] for s in responses) == prompt
        assert sum(s["metrics"]["completion_tokens"] for s in responses) == usage["output_tokens"]
        final = document["final_metrics"]
        assert final["total_prompt_tokens"] == prompt
        assert final["total_completion_tokens"] == usage["output_tokens"]
        assert final["total_cost_usd"] == pytest.approx(usage["cost"])
        assert final["total_steps"] == len(steps)
        metered += usage["provider_requests"]

        # The agent's account: placed at its policy call, unverified, its words data.
        account = [s for s in steps if _kind(s) == "agent_account"]
        assert account and all(s["extra"]["mailroom"]["verified"] is False for s in account)
        # Never the evaluator's: what the agent says of a system event stays its own.
        assert {s["source"] for s in account} == {"agent"}
        calls = [s for s in account if "tool_calls" in s]
        assert len(calls) == 2 * len(observations)
        for call in calls:
            [tool] = call["tool_calls"]
            [answered] = call["observation"]["results"]
            assert tool["function_name"] == "Bash"
            assert answered["source_call_id"] == tool["tool_call_id"]
        position = {id(s): i for i, s in enumerate(steps)}
        for observation, response in zip(observations, responses, strict=True):
            n = observation["extra"]["mailroom"]["sequence"]
            between = steps[position[id(observation)] + 1 : position[id(response)]]
            commands = [
                s["tool_calls"][0]["arguments"]["shown"] for s in between if "tool_calls" in s
            ]
            assert commands == [
                f"cat <endpoint>/outbox/obs-{n}.json",
                f"mv inbox/.resp-{n}.json.tmp inbox/resp-{n}.json",
            ]
            said = [s["message"] for s in between if s.get("source") == "agent" and s["message"]]
            assert "<script>alert('account')</script> \x1b[31mred\x1b[0m" in said
        assert any(s.get("reasoning_content", "").startswith("The provider said") for s in account)
        assert account[-1]["message"] == "the episode ended"
        assert document["extra"]["mailroom"]["agent_account"]["format"] == "claude_stream_json"
    assert metered == len(provider.requests())


def test_inspect_scout_imports_each_trajectory_as_a_transcript(
    run: tuple[Path, dict[str, str]], tmp_path: Path
) -> None:
    """An agent-trajectory tool reads the export as it reads Harbor's agents': every
    trajectory a transcript, nothing skipped or taken for one (index.json), every image
    loaded."""
    assert_installed_as_locked("inspect_scout", SCOUT_LOCKS)
    run_dir, env = run
    out = tmp_path / "atif"
    exported = _export(run_dir, env, "--out", str(out))
    assert exported.returncode == 0, exported.stderr
    imported = import_with_inspect_scout(out, tmp_path / "scout")
    assert imported["warnings"] == []
    transcripts = {t["transcript_id"]: t for t in imported["transcripts"]}
    attempts = sorted(p.name for p in (run_dir / "episodes").iterdir())
    run_id = json.loads((run_dir / "manifest.json").read_text())["run_id"]
    assert sorted(transcripts) == [f"{run_id}:{attempt}" for attempt in attempts]
    for attempt in attempts:
        assert_transcript_is_its_trajectory(transcripts[f"{run_id}:{attempt}"], out / attempt)


def test_no_export_holds_a_key_or_a_path_of_this_machine(
    run: tuple[Path, dict[str, str]], module_mailbox_root: Path
) -> None:
    run_dir, env = run
    outs = {}
    for fmt in ("atif", "parquet", "rerun", "lerobot"):
        out = run_dir.parent / f"export-{fmt}"
        exported = run_cli(
            *("export", str(run_dir), "--format", fmt, "--out", str(out), "--json"), env=env
        )
        assert exported.returncode == 0, (fmt, exported.stderr)
        outs[fmt] = out
        assert any(p.is_file() for p in out.rglob("*")), fmt
    # The key was in launch's environment and on every request the stand-in saw.
    needles = [KEY, str(run_dir), str(module_mailbox_root), str(REPO), str(run_dir.parent)]
    needles += [str(run_dir.resolve()), str(REPO.resolve()), "/tmp/mailroom-test-"]
    for fmt, out in outs.items():
        assert leaks_under(out, needles) == [], fmt


def test_one_attempt_and_what_is_refused_or_skipped(
    run: tuple[Path, dict[str, str]], tmp_path: Path
) -> None:
    run_dir, env = run
    one = _export(run_dir, env, "--attempt", FIRST, "--out", str(tmp_path / "one"))
    assert one.returncode == 0, one.stderr
    assert [t["attempt_id"] for t in json.loads(one.stdout)["trajectories"]] == [FIRST]
    again = _export(run_dir, env, "--attempt", FIRST, "--out", str(tmp_path / "one"))
    assert again.returncode == 0, again.stderr  # its own export is replaced

    assert_usage_error(_export(run_dir, env, "--out", "/"), "is no folder")
    unknown = _export(run_dir, env, "--attempt", "no-such-attempt")
    assert_usage_error(unknown, "no attempt 'no-such-attempt'")
    foreign = tmp_path / "foreign"
    foreign.mkdir()
    (foreign / "notes.txt").write_text("mine")
    refused = _export(run_dir, env, "--out", str(foreign))
    assert_usage_error(refused, "is not a trajectory export this export wrote")
    assert (foreign / "notes.txt").read_text() == "mine"
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".")]  # no temporary left
    # A folder an earlier version of this export wrote is replaced; an index whose
    # format is no text is not this export's.
    older = tmp_path / "older"
    older.mkdir()
    (older / "index.json").write_text(json.dumps({"format": "mailroom.atif/v1"}))
    (older / "stale.txt").write_text("from v1")
    replaced = _export(run_dir, env, "--attempt", FIRST, "--out", str(older))
    assert replaced.returncode == 0, replaced.stderr
    assert not (older / "stale.txt").exists() and (older / FIRST / "trajectory.json").is_file()
    odd = tmp_path / "odd"
    odd.mkdir()
    (odd / "index.json").write_text(json.dumps({"format": ["mailroom.atif/v2"]}))
    assert_usage_error(_export(run_dir, env, "--out", str(odd)), "is not a trajectory export")
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".")]

    # A copy of the run with one image that is not what was delivered: that attempt is
    # skipped and listed, the other exported; then one requests file that says less
    # than its result: skipped too.
    copy = tmp_path / "run"
    shutil.copytree(run_dir, copy, ignore=shutil.ignore_patterns("export"))
    first, second = sorted((copy / "episodes").iterdir())
    (first / "observations" / "obs-1-overhead.png").write_bytes(b"\x89PNG not it")
    skipped = _export(copy, env)
    assert skipped.returncode == 4, skipped.stderr
    summary = json.loads(skipped.stdout)
    [listed] = summary["skipped"]
    assert listed["file"] == f"episodes/{first.name}"
    assert "is not the image its observation delivered" in listed["reason"]
    assert [t["attempt_id"] for t in summary["trajectories"]] == [second.name]
    assert not (Path(summary["out"]) / first.name).exists()

    requests = second / "provider-requests.jsonl"
    requests.write_text("".join(requests.read_text().splitlines(keepends=True)[1:]))
    skipped = _export(copy, env)
    assert skipped.returncode == 4, skipped.stderr
    summary = json.loads(skipped.stdout)
    assert summary["trajectories"] == []
    reasons = {s["file"]: s["reason"] for s in summary["skipped"]}
    assert "forwarded" in reasons[f"episodes/{second.name}"]
