"""A real toy-family run of an agent-like actor: launched by `mailroom launch`, recorded
`full`, its sandboxed actor (`actors/accounted_agent_actor.py`) asking a stand-in
Anthropic provider through the real provider gateway with a stand-in key and printing
its own account as Claude Code does. What the ATIF export and the tools that read it
are tried on."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from conftest import copied_actor
from gateway_profiles import anthropic_gateway_profile
from toy_family_runs import launch_toy, plan_toy

KEY = "sk-standin-atif-0123456789abcdef-never-written"
ATTEMPTS = (
    "toyworld_shelf-t000-i00-o0-s20260907-a1",
    "toyworld_shelf-t001-i00-o0-s20260907-a1",
)


def _profile(folder: Path, actor: Path) -> Path:
    folder.mkdir()
    shutil.copyfile(actor, folder / "actor.py")
    profile = anthropic_gateway_profile(
        "accounted_agent",
        "an agent-like test actor that prints its account as Claude Code does",
        {
            "command": ["{python}", "{profile_dir}/actor.py", "{endpoint}"],
            "trace": "claude_stream_json",
        },
    )
    (folder / "profile.json").write_text(json.dumps(profile))
    return folder


def launch_accounted_run(
    base: Path, toy_env: dict[str, str], provider_origin: str, mailbox_root: Path
) -> tuple[Path, dict[str, str]]:
    """The run (two attempts, three policy calls each) in `base`/run, and the
    environment it was launched with (the stand-in key among it)."""
    actor = copied_actor(base / "actors", "accounted_agent_actor.py")
    profile = _profile(base / "accounted_agent", actor)
    env = {
        **{k: v for k, v in toy_env.items() if not k.startswith("ANTHROPIC_")},
        "ANTHROPIC_API_KEY": KEY,
        "ANTHROPIC_BASE_URL": provider_origin,
    }
    plan = plan_toy(base / "plan.json", "toyworld_shelf", env)
    run_dir = base / "run"
    launch_toy(
        plan,
        run_dir,
        mailbox_root,
        env,
        *("--profile", str(profile), "--max-policy-calls", "3", "--record", "full"),
    )
    return run_dir, env
