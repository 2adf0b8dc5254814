"""`mailroom launch` and `resume` of a gateway profile, as a user runs them, on the toy
family (a real distribution, the sandboxed actor, the real gateway, a stand-in provider):

- without the key in launch's environment the launch is refused (exit 2), naming the
  variable, before anything is created;
- a price table that is not one is refused (exit 2);
- with the key and the coordinator's own price table every episode is metered, the
  manifest records the gateway (provider, routes, the key's variable name, the table by
  hash, user_file) and the upstream as volatile, the key nowhere;
- a resume with another price table is refused as a different method (exit 5).
"""

from __future__ import annotations

import json
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
import toy_family_runs
from conftest import REPO, mailroom_exe
from gateway_profiles import anthropic_gateway_profile
from mailroom.hashing import sha256_bytes
from mailroom.orchestrator.perf.provider_standin.anthropic_standin import AnthropicStandIn

KEY = "sk-real-key-for-the-launch-test-0123456789"
PROFILE = anthropic_gateway_profile(
    "gateway_probe",
    "an agent-like test actor that asks its provider through the gateway",
    {"command": ["{python}", "{profile_dir}/actor.py", "{endpoint}", "answer"]},
)

# A fixture of tests/support, used by name.
toy_env = toy_family_runs.toy_env


@pytest.fixture
def profile(tmp_path: Path) -> Path:
    folder = tmp_path / "gateway_probe"
    folder.mkdir()
    (folder / "profile.json").write_text(json.dumps(PROFILE))
    shutil.copyfile(
        REPO / "tests" / "support" / "actors" / "gateway_client_actor.py", folder / "actor.py"
    )
    return folder


@pytest.fixture
def provider() -> Iterator[AnthropicStandIn]:
    with AnthropicStandIn() as standin:
        yield standin


def _mailroom(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [mailroom_exe(), *args],
        capture_output=True,
        text=True,
        timeout=600,
        env={**env, "COLUMNS": "200"},
    )


def test_a_gateway_profile_is_launched_metered_and_resumed_only_with_its_prices(
    toy_env: dict[str, str],
    profile: Path,
    provider: AnthropicStandIn,
    tmp_path: Path,
    mailbox_root: Path,
) -> None:
    plan = tmp_path / "plan.json"
    made = _mailroom(
        toy_env, "plan", "--kind", "fast", "--suite", "toyworld_shelf", "--out", str(plan)
    )
    assert made.returncode == 0, made.stderr
    run_dir = tmp_path / "run"
    base = {k: v for k, v in toy_env.items() if not k.startswith("ANTHROPIC_")}
    launch = [
        *("launch", str(plan), "--profile", str(profile), "--run-dir", str(run_dir)),
        *("--mailbox-root", str(mailbox_root), "--response-timeout", "60"),
        *("--max-policy-calls", "3", "--record", "minimal"),
    ]

    refused = _mailroom({**base, "ANTHROPIC_BASE_URL": provider.origin}, *launch)
    assert refused.returncode == 2, refused.stderr
    assert "ANTHROPIC_API_KEY" in refused.stdout + refused.stderr
    assert not run_dir.exists()

    env = {**base, "ANTHROPIC_API_KEY": KEY, "ANTHROPIC_BASE_URL": provider.origin}
    bad = tmp_path / "bad-prices.json"
    bad.write_text('{"schema": "mailroom.price_table/v1", "models": "none"}')
    refused = _mailroom(env, *launch, "--price-table", str(bad))
    assert refused.returncode == 2, refused.stderr
    assert "price table" in (refused.stdout + refused.stderr).lower()
    assert not run_dir.exists()

    shipped = REPO / "orchestrator" / "gateway" / "prices.json"
    own = tmp_path / "own-prices.json"
    own.write_bytes(shipped.read_bytes().replace(b'"input": 1.0,', b'"input": 1.25,', 1))
    assert own.read_bytes() != shipped.read_bytes()
    launched = _mailroom(env, *launch, "--price-table", str(own))
    assert launched.returncode == 0, launched.stderr[-3000:]

    manifest = json.loads((run_dir / "manifest.json").read_text())
    gateway = manifest["provider_gateway"]
    assert manifest["confinement"]["network"] == "gateway"
    assert gateway["provider"] == "anthropic" and gateway["routes"] == ["POST /v1/messages"]
    assert gateway["key_variable"] == "ANTHROPIC_API_KEY"
    assert gateway["price_table"]["sha256"] == sha256_bytes(own.read_bytes())
    assert gateway["price_table"]["user_file"] is True
    assert manifest["volatile"]["provider_upstream"] == provider.origin
    results = [json.loads(p.read_text()) for p in run_dir.glob("episodes/*/result.json")]
    assert results and all(r["usage"]["source"] == "gateway" for r in results)
    assert all(r["usage"]["model_verified"] is True for r in results)
    assert len(provider.requests()) == len(results)
    holding = [p for p in run_dir.rglob("*") if p.is_file() and KEY.encode() in p.read_bytes()]
    assert holding == []

    # The same run with other prices is another method: refused.
    resumed = _mailroom(env, "resume", str(run_dir), "--price-table", str(shipped))
    assert resumed.returncode == 5, resumed.stdout + resumed.stderr
    assert "provider_gateway.price_table" in resumed.stdout + resumed.stderr


def test_a_web_search_the_provider_ran_is_flagged_by_the_audit(
    toy_env: dict[str, str], profile: Path, tmp_path: Path, mailbox_root: Path
) -> None:
    """The profiles turn the CLIs' web tools off; a provider that searched anyway (its
    usage says so) is a blinding risk the audit cannot check: it says so, not clean."""
    plan = tmp_path / "plan.json"
    made = _mailroom(
        toy_env, "plan", "--kind", "fast", "--suite", "toyworld_shelf", "--out", str(plan)
    )
    assert made.returncode == 0, made.stderr
    run_dir = tmp_path / "run"
    with AnthropicStandIn(web_search_requests=2) as searching:
        env = {**toy_env, "ANTHROPIC_API_KEY": KEY, "ANTHROPIC_BASE_URL": searching.origin}
        launched = _mailroom(
            env,
            *("launch", str(plan), "--profile", str(profile), "--run-dir", str(run_dir)),
            *("--mailbox-root", str(mailbox_root), "--max-policy-calls", "3"),
            *("--record", "minimal"),
        )
    assert launched.returncode == 0, launched.stderr[-3000:]
    results = [json.loads(p.read_text()) for p in run_dir.glob("episodes/*/result.json")]
    assert results and all(r["usage"]["server_tool_uses"] == 2 for r in results)
    audited = _mailroom(toy_env, "audit", str(run_dir), "--json")
    assert audited.returncode != 0, audited.stdout
    verdict = json.loads(audited.stdout)
    risks = [u for u in verdict["unverifiable"] if u["reason"].startswith("blinding risk")]
    assert len(risks) == len(results) and not verdict["clean"]
    assert "2 server-side tool use(s) (web search)" in risks[0]["reason"]
