"""What a Ray worker compares on its node: the agent CLI installation's versions against
those the run's manifest recorded (`installation_difference`)."""

from __future__ import annotations

import json
from pathlib import Path

from mailroom.orchestrator.actors.agent_installation import (
    installation_difference,
    installed_versions,
)


def _installation(root: Path, installed: dict[str, str]) -> Path:
    """An installation folder asking for `a` and `b`, holding `installed`."""
    (root / "package.json").write_text(json.dumps({"dependencies": {"a": "*", "b": "*"}}))
    for name, version in installed.items():
        folder = root / "node_modules" / name
        folder.mkdir(parents=True)
        (folder / "package.json").write_text(json.dumps({"name": name, "version": version}))
    return root / "node_modules"


def test_the_same_versions_make_no_difference(tmp_path: Path) -> None:
    folder = _installation(tmp_path, {"a": "1.0.0", "b": "2.0.0"})
    recorded = installed_versions(folder)
    assert recorded == {"npm:a": "1.0.0", "npm:b": "2.0.0"}
    assert installation_difference(recorded, folder) is None


def test_another_or_a_missing_version_is_named_with_both_sides(tmp_path: Path) -> None:
    folder = _installation(tmp_path, {"a": "1.0.1"})
    problem = installation_difference({"npm:a": "1.0.0", "npm:b": "2.0.0"}, folder)
    assert problem is not None
    assert "npm:a 1.0.1 here, 1.0.0 in the run's manifest" in problem
    assert "npm:b missing here, 2.0.0 in the run's manifest" in problem


def test_no_installation_at_all_differs_from_any_recorded_version(tmp_path: Path) -> None:
    problem = installation_difference({"npm:a": "1.0.0"}, tmp_path / "nothing" / "node_modules")
    assert problem is not None and "npm:a missing here" in problem
