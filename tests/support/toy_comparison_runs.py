"""Four real `mailroom launch`es of one toy-family plan (tests/support/toy_family: a fake
simulator, sandboxed actors, no LIBERO), and the comparison site `mailroom view` makes of
them: the diagnostic actor (succeeds), a shell actor that stops before success (fails),
an actor whose note is markup (succeeds), and the diagnostic actor under fewer policy
calls (other protocol settings).

Fixture: `toy_runs` (it needs `toy_env`, tests/support/toy_family_runs.py); a test
module uses them by importing both (`# noqa: F401`).
"""

from __future__ import annotations

import json
import subprocess
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from conftest import copied_actor, run_cli
from mailroom.orchestrator.viewer.comparison_data import run_key
from toy_family_runs import launch_toy, plan_toy

# The runs, in the order they are given to `view`: name -> (actor, launch options).
RUNS: dict[str, tuple[str | None, tuple[str, ...]]] = {
    "scripted": (None, ("--max-policy-calls", "4")),
    "stopping": ("shell_actor.sh", ("--max-policy-calls", "4")),
    "markup": ("markup_actor.py", ("--max-policy-calls", "4")),
    "fewer-calls": (None, ("--max-policy-calls", "3")),
}
SAME_SETTINGS = ("scripted", "stopping", "markup")


@dataclass(frozen=True)
class ToyRuns:
    env: dict[str, str]
    runs: dict[str, Path]
    site: Path
    reports: dict[str, dict[str, Any]] = field(default_factory=dict)

    def key(self, name: str) -> str:
        return run_key(list(self.runs).index(name), self.runs[name])

    def report(self, name: str) -> dict[str, Any]:
        """`mailroom report RUN --json` (once per run: the runs do not change)."""
        if name not in self.reports:
            done = run_cli("report", str(self.runs[name]), "--json", env=self.env)
            assert done.returncode == 0, done.stderr
            self.reports[name] = json.loads(done.stdout)
        return self.reports[name]

    def compare(self, a: str, b: str, *options: str) -> subprocess.CompletedProcess[str]:
        return run_cli("compare", str(self.runs[a]), str(self.runs[b]), *options, env=self.env)

    def view(self, out: Path, *options: str) -> subprocess.CompletedProcess[str]:
        return run_cli(
            "view", *map(str, self.runs.values()), "--out", str(out), *options, env=self.env
        )


def launch_toy_runs(base: Path, env: dict[str, str], mailbox_root: Path) -> dict[str, Path]:
    """The four runs of one toy plan (module docstring), launched for real."""
    plan = plan_toy(base / "plan.json", "toyworld_shelf", env)
    runs: dict[str, Path] = {}
    for number, (name, (actor, options)) in enumerate(RUNS.items()):
        chosen: tuple[str, ...] = ()
        if actor is not None:
            copied = copied_actor(base / "actors", actor)
            runner = "python3" if actor.endswith(".py") else "sh"
            chosen = ("--actor", f"{runner} {copied} {{endpoint}}")
        launch_toy(plan, base / name, mailbox_root / f"m{number}", env, *options, *chosen)
        runs[name] = base / name
    return runs


@pytest.fixture(scope="module")
def toy_runs(
    toy_env: dict[str, str], tmp_path_factory: pytest.TempPathFactory, module_mailbox_root: Path
) -> ToyRuns:
    base = tmp_path_factory.mktemp("compared")
    runs = launch_toy_runs(base, toy_env, module_mailbox_root)
    made = ToyRuns(toy_env, runs, base / "site")
    viewed = made.view(made.site)
    assert viewed.returncode == 0, viewed.stderr
    assert "comparison of 4 runs (3 pair(s) compared, 2 shared case(s))" in viewed.stderr
    return made
