"""Where the project's own files live."""

from __future__ import annotations

from importlib import resources
from pathlib import Path

# Strict editable installs link each module back to the repository.
REPO_ROOT = Path(__file__).resolve().parents[2]
AGENT_POLICIES = REPO_ROOT / "AgentPolicies"


def profile_dir(profile: str) -> Path:
    path = AGENT_POLICIES / profile
    if not path.is_dir():
        raise FileNotFoundError(f"no method profile {profile!r} under {AGENT_POLICIES}")
    return path


def actor_instructions_template() -> str:
    return (
        resources.files("mailroom.prompts")
        .joinpath("actor_instructions.txt")
        .read_text(encoding="utf-8")
    )
