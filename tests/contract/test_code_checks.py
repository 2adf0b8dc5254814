"""The code's own checks, run with the tests so that `make test` fails on any of them:
ruff's lint and format, and `mypy --strict` of the package, the tests, setup.py and the
documentation's hooks (the import layers: `test_layers.py`). `make lint` and
`make typecheck` run the same tools on their own."""

from __future__ import annotations

import subprocess

import pytest
from conftest import BIN, REPO


def _tool(*command: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(BIN / command[0]), *command[1:]],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=900,
    )


@pytest.mark.parametrize(
    "command",
    [
        ("ruff", "check", "."),
        ("ruff", "format", "--check", "."),
        ("mypy", "-p", "mailroom"),
        ("mypy", "tests", "setup.py", "docs/hooks"),
    ],
    ids=["ruff-check", "ruff-format", "mypy-package", "mypy-tests"],
)
def test_the_tree_passes(command: tuple[str, ...]) -> None:
    done = _tool(*command)
    assert done.returncode == 0, f"{' '.join(command)}:\n{done.stdout}{done.stderr}"
