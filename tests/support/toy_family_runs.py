"""The toy family (`tests/support/toy_family`: a tiny catalog and a fake simulator, no
LIBERO) installed for real as its own distribution, into a folder of its own on
PYTHONPATH (nothing of it in mailroom's checkout or venv), and its plans and real
launches through the `mailroom` command.

Fixtures: `toy_env` (the environment of a process that has the family installed) and
`toy_run` (a real launch of its `toyreach` suite); a test module uses them by importing
them (`# noqa: F401`).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from conftest import REPO, mailroom_exe, run_cli

TOY = REPO / "tests" / "support" / "toy_family"
# The family's suite of another action dimension (mailbox protocol v2), one camera.
TOYREACH_SUITE = "toyreach_table"


def install_toy_family(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    """The environment of a process that has the toy family installed (pip into a
    folder of its own, on PYTHONPATH): nothing of it is in mailroom's checkout or venv."""
    target = tmp_path_factory.mktemp("toy-site")
    # Built from a copy: a build leaves its folders beside the sources.
    source = shutil.copytree(TOY, tmp_path_factory.mktemp("toy-source") / "toy_family")
    subprocess.run(
        [
            *(sys.executable, "-m", "pip", "install", "--quiet", "--no-deps"),
            *("--target", str(target), str(source)),
        ],
        check=True,
        capture_output=True,
        timeout=600,
    )
    assert (target / "mailroom_toy_family").is_dir()
    assert any(target.glob("mailroom_toy_family-*.dist-info/entry_points.txt"))
    return {**os.environ, "PYTHONPATH": str(target)}


def plan_toy(out: Path, suite: str, env: dict[str, str]) -> Path:
    """`mailroom plan --kind fast --suite SUITE --out OUT` where the family is installed."""
    made = run_cli(*("plan", "--kind", "fast", "--suite", suite, "--out", str(out)), env=env)
    assert made.returncode == 0, made.stderr
    return out


def launch_toy(
    plan: Path, run_dir: Path, mailbox_root: Path, env: dict[str, str], *options: str
) -> subprocess.CompletedProcess[str]:
    """`mailroom launch PLAN` of the diagnostic profile (its sandboxed actor unless the
    options name another with `--actor`) with a 60 s response deadline, where the
    family is installed, 200 columns wide; it must succeed."""
    launched = subprocess.run(
        [
            *(mailroom_exe(), "launch", str(plan)),
            *("--profile", "scripted_diagnostic", "--run-dir", str(run_dir)),
            *("--mailbox-root", str(mailbox_root), "--response-timeout", "60"),
            *options,
        ],
        capture_output=True,
        text=True,
        timeout=600,
        env={**env, "COLUMNS": "200"},
    )
    assert launched.returncode == 0, launched.stderr[-3000:]
    return launched


@pytest.fixture(scope="module")
def toy_env(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    return install_toy_family(tmp_path_factory)


@pytest.fixture(scope="module")
def toy_run(
    toy_env: dict[str, str], tmp_path_factory: pytest.TempPathFactory, module_mailbox_root: Path
) -> Iterator[Path]:
    """A real launch of the `toyreach` suite's fast plan, four policy calls each."""
    work = tmp_path_factory.mktemp("toy-run")
    plan = plan_toy(work / "plan.json", TOYREACH_SUITE, toy_env)
    run_dir = work / "run"
    launch_toy(plan, run_dir, module_mailbox_root / "toy", toy_env, "--max-policy-calls", "4")
    yield run_dir
