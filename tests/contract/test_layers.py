"""The layers of orchestrator/README.md's map hold: `lint-imports` checks the contracts in
pyproject.toml ([tool.importlinter]) on the installed tree, and a copy of the checkout's
modules with one forbidden import added breaks the contract that forbids it."""

from __future__ import annotations

import ast
import os
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest
from conftest import REPO

LINT_IMPORTS = Path(sys.executable).with_name("lint-imports")
CONTRACTS = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))["tool"][
    "importlinter"
]["contracts"]
NAMES = {contract["id"]: contract["name"] for contract in CONTRACTS}


def _lint_imports(cwd: Path, pythonpath: Path | None = None) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ)
    if pythonpath is not None:
        env["PYTHONPATH"] = str(pythonpath)
    return subprocess.run(
        [str(LINT_IMPORTS), "--no-cache"],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )


def _folders() -> dict[str, str]:
    """setup.py's map of the checkout's folders to packages (`FOLDERS`), read, not run."""
    tree = ast.parse((REPO / "setup.py").read_text(encoding="utf-8"))
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(
            isinstance(target, ast.Name) and target.id == "FOLDERS" for target in node.targets
        ):
            folders: dict[str, str] = ast.literal_eval(node.value)
            return folders
    raise AssertionError("setup.py has no FOLDERS")


def _copy_of_the_package(tmp_path: Path) -> Path:
    """The checkout's modules laid out as the install maps them, as plain files, with this
    pyproject.toml beside them."""
    for package, folder in _folders().items():
        shutil.copytree(
            REPO / folder,
            tmp_path.joinpath(*package.split(".")),
            ignore=shutil.ignore_patterns("__pycache__", "*.json", "*.txt", "*.md", "py.typed"),
        )
    shutil.copyfile(REPO / "pyproject.toml", tmp_path / "pyproject.toml")
    return tmp_path


def test_every_room_is_a_regular_package() -> None:
    """A folder without `__init__.py` is a namespace portion, which the import graph skips
    unless it is a root package of the contracts: its imports would go unchecked. mailbox/
    is one by design (tests/sandbox/test_namespace.py), and a root package of its own."""
    roots = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))["tool"][
        "importlinter"
    ]["root_packages"]
    folders = _folders()
    assert {"mailroom", "mailroom.mailbox"} <= set(roots) <= set(folders)
    missing = []
    for package, folder in folders.items():
        for directory in [REPO / folder, *(REPO / folder).rglob("*")]:
            if not directory.is_dir() or directory.name == "__pycache__":
                continue
            name = ".".join([package, *directory.relative_to(REPO / folder).parts])
            if any(directory.glob("*.py")) and not (directory / "__init__.py").is_file():
                missing.append(name)
    assert sorted(set(missing) - set(roots)) == []


def test_the_tree_keeps_every_import_contract() -> None:
    done = _lint_imports(REPO)
    assert done.returncode == 0, done.stdout + done.stderr
    for name in NAMES.values():
        assert f"{name} KEPT" in done.stdout


# One forbidden import per contract, each inside a function (an import there counts too):
# the file it is added to, the statement, the contract it breaks, and the import as
# lint-imports names it.
BREAKS = [
    pytest.param(
        "orchestrator/sim/base.py",
        "from mailroom.orchestrator.episode import runner",
        "rooms",
        "mailroom.orchestrator.sim.base -> mailroom.orchestrator.episode.runner",
        id="sim-imports-episode",
    ),
    pytest.param(
        "orchestrator/records/__init__.py",
        "import mailroom.orchestrator.campaign",
        "rooms",
        "mailroom.orchestrator.records -> mailroom.orchestrator.campaign",
        id="records-imports-campaign",
    ),
    pytest.param(
        "mailbox/parser.py",
        "import mailroom.orchestrator",
        "packages",
        "mailroom.mailbox.parser -> mailroom.orchestrator",
        id="mailbox-imports-orchestrator",
    ),
    pytest.param(
        "measures.py",
        "from mailroom.mailbox import publish",
        "packages",
        "mailroom.measures -> mailroom.mailbox.publish",
        id="measures-imports-mailbox",
    ),
    pytest.param(
        "orchestrator/transport/png.py",
        "from mailroom.benchmarks.libero import adapter",
        "packages",
        "mailroom.orchestrator.transport.png -> mailroom.benchmarks.libero.adapter",
        id="transport-imports-libero",
    ),
    pytest.param(
        "benchmarks/libero/adapter.py",
        "from mailroom.benchmarks.libero_plus import scene",
        "families",
        "mailroom.benchmarks.libero.adapter -> mailroom.benchmarks.libero_plus.scene",
        id="libero-imports-its-extension",
    ),
    pytest.param(
        "benchmarks/libero_para/scene.py",
        "from mailroom.benchmarks.libero_plus import catalog",
        "families",
        "mailroom.benchmarks.libero_para.scene -> mailroom.benchmarks.libero_plus.catalog",
        id="para-imports-plus",
    ),
]


def _statuses(done: subprocess.CompletedProcess[str]) -> dict[str, str]:
    """Each contract's verdict, KEPT or BROKEN, as lint-imports printed it."""
    verdicts = {}
    for name in NAMES.values():
        for line in done.stdout.splitlines():
            if line.startswith(f"{name} "):
                verdicts[name] = line.removeprefix(f"{name} ").split()[0]
    return verdicts


@pytest.mark.parametrize(("module", "statement", "contract", "named"), BREAKS)
def test_one_forbidden_import_breaks_its_contract(
    tmp_path: Path, module: str, statement: str, contract: str, named: str
) -> None:
    """The copy is checked before and after the one added line: the contract that forbids
    it turns BROKEN naming that import, and no other contract's verdict changes (whatever
    the tree's own state)."""
    root = _copy_of_the_package(tmp_path)
    before = _lint_imports(root, pythonpath=root)
    target = root / "mailroom" / module
    with target.open("a", encoding="utf-8") as fh:
        fh.write(f"\n\ndef _forbidden() -> None:\n    {statement}  # noqa\n")
    after = _lint_imports(root, pythonpath=root)
    assert named not in " ".join(before.stdout.split())
    assert after.returncode != 0
    assert named in " ".join(after.stdout.split()), after.stdout
    verdicts_before, verdicts_after = _statuses(before), _statuses(after)
    assert set(verdicts_after) == set(NAMES.values()), after.stdout + after.stderr
    assert verdicts_after[NAMES[contract]] == "BROKEN"
    assert {k: v for k, v in verdicts_after.items() if k != NAMES[contract]} == {
        k: v for k, v in verdicts_before.items() if k != NAMES[contract]
    }
