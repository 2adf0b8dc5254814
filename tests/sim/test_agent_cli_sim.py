"""Real agent CLIs as confined actors of a real LIBERO episode.

Claude Code, Codex CLI and Gemini CLI, installed from the project's pinned npm lockfile,
run as the actor of one LIBERO episode through `mailroom launch --profile
claude_code|codex_cli|gemini_cli`,
each in its bubblewrap sandbox whose only route out is the provider gateway. Only the
model provider is stood in: a server on the host's 127.0.0.1 speaking the provider's
streaming API, whose scripted "model" has the agent read each observation and write each
response with its own shell tool (`orchestrator/perf/provider_standin/`), reporting varied usage
(cache reads and writes included) and, for one CLI, answering as another model than the
one asked for. Each run must have at least 3 accepted decisions and no rejected one, the
agent must exit by itself after `closed.json`, no process of its sandbox may survive, the
stand-in must have seen the real key on every request, the key must appear nowhere in
the run, the endpoint or the actor's environment, the result's metered tokens must equal
the stand-in's own sums exactly with the answering model recorded, `mailroom audit`
must exit 0, and the run's ATIF export must pass Harbor's validator with the agent's own
account read from its output and the metered tokens adding up, the key nowhere in it.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from conftest import REPO, cli_plan, mailroom_exe, run_cli, sandbox_processes_left
from harbor.utils.trajectory_validator import TrajectoryValidator
from mailroom.mailbox.endpoint import new_mailbox_root
from mailroom.orchestrator.actors.agent_installation import AGENT_CLI_FOLDER
from mailroom.orchestrator.perf.provider_standin.anthropic_standin import AnthropicStandIn
from mailroom.orchestrator.perf.provider_standin.driver import DriverSettings
from mailroom.orchestrator.perf.provider_standin.gemini_standin import GeminiStandIn
from mailroom.orchestrator.perf.provider_standin.http_standin import Recorded, ScriptedStandIn
from mailroom.orchestrator.perf.provider_standin.openai_standin import OpenAIStandIn
from recorded_events import attempt_events
from scout_client import assert_transcript_is_its_trajectory, import_with_inspect_scout

ACT_DECISIONS = 3
# Not a key: what the sandboxed agent sends its stand-in provider, searched for in the
# run afterwards (a passed value is never written anywhere).
KEY = "sk-standin-0123456789abcdef-never-written"


@dataclass(frozen=True)
class AgentCli:
    profile: str
    program: str
    provider: Callable[[DriverSettings], ScriptedStandIn]
    key_variable: str
    base_url_variable: str
    base_path: str  # what the CLI expects after the origin in its base URL
    model: str
    routes: frozenset[str]  # every request path the CLI may send
    answer_model: str | None  # the model the stand-in says answered (None: the one asked)
    generation: str  # the route that generates (and reports usage)


CLIS = (
    AgentCli(
        "claude_code",
        "claude",
        AnthropicStandIn,
        "ANTHROPIC_API_KEY",
        "ANTHROPIC_BASE_URL",
        "",
        "standin-claude-model",
        frozenset({"/v1/messages", "/v1/messages/count_tokens"}),
        "standin-claude-other-model",
        "/v1/messages",
    ),
    AgentCli(
        "codex_cli",
        "codex",
        OpenAIStandIn,
        "OPENAI_API_KEY",
        "OPENAI_BASE_URL",
        "/v1",
        "standin-codex-model",
        frozenset({"/v1/responses", "/v1/models"}),
        None,
        "/v1/responses",
    ),
    AgentCli(
        "gemini_cli",
        "gemini",
        GeminiStandIn,
        "GEMINI_API_KEY",
        "GOOGLE_GEMINI_BASE_URL",
        "",
        "standin-gemini-model",
        frozenset(
            f"/v1beta/models/standin-gemini-model:{method}"
            for method in ("streamGenerateContent", "generateContent", "countTokens")
        ),
        None,
        "/v1beta/models/standin-gemini-model:streamGenerateContent",
    ),
)
GEMINI_PATH_MODEL = re.compile(r"^/v1beta/models/([^/:?]+):")


def _named_model(request: Recorded) -> str | None:
    """The model a request asks for: its body's `model`, or (Gemini) its path's."""
    if isinstance(request.body, dict) and "model" in request.body:
        return str(request.body["model"])
    in_path = GEMINI_PATH_MODEL.match(request.path)
    return in_path.group(1) if in_path else None


def test_the_agent_clis_are_installed_from_the_lockfile() -> None:
    """Never skipped: without the npm registry `make` cannot install them, and this says so."""
    lock = json.loads((AGENT_CLI_FOLDER.parent / "package-lock.json").read_text())
    for cli in CLIS:
        program = AGENT_CLI_FOLDER / ".bin" / cli.program
        assert program.exists(), (
            f"{program} is missing: the agent CLIs are installed by `make agent-clis` from "
            "agent_clis/package-lock.json, which needs the npm registry"
        )
    for name, entry in lock["packages"].items():
        if name:  # every installed package is pinned with its integrity hash
            assert entry.get("integrity", "").startswith("sha512-"), name


@pytest.fixture(scope="module")
def plan(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("plan") / "plan.json"
    return cli_plan(out, "task_coverage", "--suite", "libero_spatial", "--task-ids", "0")


@pytest.fixture
def mailbox() -> Iterator[Path]:
    root = new_mailbox_root("mailroom-test-")
    yield root
    shutil.rmtree(root, ignore_errors=True)


def _files_holding(root: Path, needle: bytes) -> list[Path]:
    return [p for p in root.rglob("*") if p.is_file() and needle in p.read_bytes()]


@pytest.mark.parametrize("cli", CLIS, ids=[c.profile for c in CLIS])
def test_a_real_agent_cli_runs_a_confined_episode_and_the_audit_is_clean(
    cli: AgentCli, plan: Path, mailbox: Path, tmp_path: Path
) -> None:
    run_dir = tmp_path / "run"
    provider = cli.provider(DriverSettings(act_decisions=ACT_DECISIONS))
    provider.answer_model = cli.answer_model
    with provider:
        env = {
            **os.environ,
            cli.key_variable: KEY,
            cli.base_url_variable: provider.origin + cli.base_path,
        }
        launched = subprocess.run(
            [
                *(mailroom_exe(), "launch", str(plan), "--profile", cli.profile),
                *("--model", cli.model, "--run-dir", str(run_dir)),
                *("--mailbox-root", str(mailbox), "--max-policy-calls", "8"),
                *("--response-timeout", "180", "--record", "minimal", "--json"),
            ],
            capture_output=True,
            text=True,
            env=env,
            timeout=900,
        )
        requests = provider.requests()
        totals = provider.usage_totals()
    assert launched.returncode == 0, launched.stderr[-3000:]
    (attempt,) = sorted((run_dir / "episodes").iterdir())
    result = json.loads((attempt / "result.json").read_text())
    counters = result["counters"]
    assert counters["action_decisions"] >= ACT_DECISIONS, result
    assert counters["rejected_responses"] == 0, result
    assert result["termination"] in ("actor_stop", "native_success"), result
    assert result["confinement"] == {"mode": "sandbox", "network": "gateway"}

    events = attempt_events(attempt)
    (started,) = [e for e in events if e["event"] == "actor_started"]
    (stopped,) = [e for e in events if e["event"] == "actor_stopped"]
    assert stopped["exited_by_itself"] is True, stopped
    assert stopped["leftover_processes"] == 0
    assert sandbox_processes_left(run_dir) == []
    # What it was handed: the profile's own command with the model, the fixed values and
    # the passed names, the key's value never.
    assert started["argv"][0] == cli.program or started["argv"][0].startswith("/opt/actor/")
    assert cli.model in started["argv"]
    # In place of the key, the episode's own token; in place of the provider, the gateway
    # on the sandbox's own loopback.
    assert started["env"][cli.key_variable] == "<the episode's gateway token; value not recorded>"
    assert started["env"][cli.base_url_variable] == "http://127.0.0.1:8787" + cli.base_path
    assert started["network"]["namespace"] == "own"
    assert started["env"]["PATH"].endswith(":/opt/agent-clis/node_modules/.bin")
    endpoint = Path(json.loads((attempt / "endpoint.json").read_text())["endpoint"])
    assert _files_holding(run_dir, KEY.encode()) == _files_holding(endpoint, KEY.encode()) == []

    manifest = json.loads((run_dir / "manifest.json").read_text())
    (declared,) = manifest["profile"]["declaration"]["declared_models"]
    assert declared["identity"] == cli.model and declared["verified"] is False
    assert manifest["confinement"]["network"] == "gateway"
    # Which CLI acted, and the wrapper it ran through, are part of the method.
    lock = json.loads((AGENT_CLI_FOLDER.parent / "package-lock.json").read_text())
    packages = manifest["environment"]["packages"]
    for name in lock["packages"][""]["dependencies"]:
        assert packages[f"npm:{name}"] == lock["packages"][f"node_modules/{name}"]["version"]
    wrappers = {p.name for p in (REPO / "agents" / cli.profile).glob("*.sh")}
    assert {Path(p).name for p in manifest["profile"].get("programs", {})} == wrappers
    assert cli.key_variable not in manifest["confinement"]["pass_env"]

    # Every request the stand-in saw named the model the agent was told, and the model's
    # calls drove the episode.
    assert requests, "the agent never reached its provider"
    assert {r.path.split("?")[0] for r in requests} <= cli.routes, {r.path for r in requests}
    assert {_named_model(r) for r in requests} - {None} == {cli.model}
    # The real key on every request that reached the provider; the episode's token never.
    presented = {
        r.headers.get("x-api-key")
        or r.headers.get("x-goog-api-key")
        or r.headers.get("authorization")
        for r in requests
    }
    assert presented <= {KEY, f"Bearer {KEY}"}, presented

    # Metered by the gateway: exactly what the stand-in reported, per answering model.
    usage = result["usage"]
    answered = cli.answer_model or cli.model
    assert usage["source"] == "gateway"
    assert usage["declared_model"] == cli.model
    assert usage["model_verified"] is (cli.answer_model is None)
    overall = totals.overall
    for name in ("input_tokens", "output_tokens", "cache_read_tokens", "cache_write_tokens"):
        assert usage[name] == getattr(overall, name), (name, usage, overall)
    assert overall.cache_read_tokens > 0  # a meter that ignored the cache would be caught
    assert (overall.cache_write_tokens > 0) is (cli.profile == "claude_code")  # OpenAI: none
    generations = [m for m in usage["models"] if m["model"] == answered]
    assert [m["requests"] for m in generations] == [overall.requests]
    assert set(totals.by_model) == {answered}
    assert usage["failed_requests"] == 0
    assert usage["provider_requests"] == len(requests)
    assert sum(d["requests"] for d in usage["decisions"]) == len(requests)
    assert max(d["decision"] for d in usage["decisions"]) >= ACT_DECISIONS
    ledger = [json.loads(line) for line in (attempt / "provider-requests.jsonl").open()]
    assert len([r for r in ledger if r["outcome"] != "refused"]) == len(requests)
    generated = [r for r in ledger if r["route"] == cli.generation and r["outcome"] == "answered"]
    assert len(generated) == overall.requests
    assert all(r["first_byte_ms"] is not None and r["complete"] for r in generated)
    # Asked once more after closed.json (its last word): refused, never forwarded.
    assert {r["reason"] for r in ledger if r["outcome"] == "refused"} <= {"episode_over"}

    # The agent's own account is kept (its stream of tool calls), and its own state is
    # not in scratch/, which holds only what the agent chose to write there: nothing.
    trace = (attempt / "actor-stdout.log").read_text()
    lines = [json.loads(line) for line in trace.splitlines() if line.startswith("{")]
    assert len(lines) >= 2 * ACT_DECISIONS, trace[-2000:]
    assert "resp-1.json" in trace and "closed.json" in trace
    assert sorted(p.name for p in (endpoint / "scratch").iterdir()) == []

    audited = run_cli("audit", str(run_dir))
    assert audited.returncode == 0, audited.stdout + audited.stderr
    _assert_atif_export(run_dir, attempt, endpoint, answered, cli)


def _assert_atif_export(
    run_dir: Path, attempt: Path, endpoint: Path, answered: str, cli: AgentCli
) -> None:
    """The run as an ATIF trajectory, held to Harbor's validator and imported by
    inspect_scout as a transcript of it: the agent's own account
    read by its parser (tool calls with their results, unverified), each response with
    the model that answered and the metered tokens adding up to the result's; neither
    the key nor the endpoint's path in it."""
    exported = run_cli("export", str(run_dir), "--format", "atif", "--json")
    assert exported.returncode == 0, exported.stdout + exported.stderr
    summary = json.loads(exported.stdout)
    (entry,) = summary["trajectories"]
    path = Path(summary["out"]) / entry["file"]
    validator = TrajectoryValidator()
    assert validator.validate(path), validator.get_errors()
    document = json.loads(path.read_text())
    steps = document["steps"]
    kinds = [s["extra"]["mailroom"]["kind"] for s in steps]
    result = json.loads((attempt / "result.json").read_text())
    assert kinds.count("response") == result["counters"]["policy_calls"]
    account = [s for s, k in zip(steps, kinds, strict=True) if k == "agent_account"]
    calls = [s for s in account if "tool_calls" in s]
    assert len(calls) >= 2 * ACT_DECISIONS, document["extra"]["mailroom"]["agent_account"]
    assert all(s["extra"]["mailroom"]["verified"] is False for s in account)
    assert any("resp-1.json" in s["tool_calls"][0]["arguments"]["shown"] for s in calls)
    responses = [s for s, k in zip(steps, kinds, strict=True) if k == "response"]
    assert {s.get("model_name") for s in responses} == {answered}
    usage = result["usage"]
    metered = [s["metrics"] for s in responses if "metrics" in s]
    assert metered  # the gateway metered the agent's requests
    final = document["final_metrics"]
    assert final["total_completion_tokens"] == usage["output_tokens"]
    cached_apart = usage["cache_read_tokens"] + usage["cache_write_tokens"]
    prompt = usage["input_tokens"] + (cached_apart if cli.profile == "claude_code" else 0)
    assert final["total_prompt_tokens"] == prompt
    assert sum(m["completion_tokens"] for m in metered) <= usage["output_tokens"]
    assert document["agent"]["extra"]["mailroom"]["answering_models"][0]["model"] == answered
    out = Path(summary["out"])
    imported = import_with_inspect_scout(out, run_dir.parent / "scout")
    assert imported["warnings"] == []
    [transcript] = imported["transcripts"]
    assert_transcript_is_its_trajectory(transcript, path.parent)
    assert _files_holding(out, KEY.encode()) == []
    assert _files_holding(out, str(endpoint).encode()) == []
    assert _files_holding(out, str(run_dir).encode()) == []
