"""`mailroom compare` on real run directories (no simulator): pairs on shared cases,
discordant counts, the exact McNemar p-value, the verdict, and refusals."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

from conftest import mailroom_exe
from mailroom.orchestrator.campaign.run_directory import RunDirectory
from mailroom.orchestrator.catalog.cases import Case
from mailroom.orchestrator.results.comparison import compare_runs
from mailroom.orchestrator.results.documents import Outcome
from test_export import make_run, write_result


def _run(
    tmp_path: Path, name: str, outcomes: list[Outcome | None], kind: str = "development"
) -> tuple[RunDirectory, list[Case]]:
    run, cases = make_run(tmp_path / name, proprio=False, kind=kind, run_id=name)  # type: ignore[arg-type]
    for case, outcome in zip(cases, outcomes, strict=False):
        if outcome is not None:
            write_result(run, case, 1, outcome=outcome, executed=5, proprio=False)
    return run, cases


def _compare(a: Path, b: Path, *options: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [mailroom_exe(), "compare", str(a), str(b), *options],
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_two_runs_are_paired_on_their_shared_cases(tmp_path: Path) -> None:
    a, _ = _run(tmp_path, "a", ["success", "success", "success", "success", "failure"])
    b, _ = _run(tmp_path, "b", ["success", "failure", "error", "failure", None])
    done = _compare(a.root, b.root, "--json")
    assert done.returncode == 0, done.stderr
    result: dict[str, Any] = json.loads(done.stdout)
    overall = result["overall"]
    # The fifth case is unattempted in B: left out, not counted as a failure.
    assert (result["shared_cases"], result["left_out_unattempted"]) == (5, 1)
    assert overall["paired"] == 4
    assert (overall["both_succeeded"], overall["only_a_succeeded"]) == (1, 3)
    assert (overall["only_b_succeeded"], overall["neither_succeeded"]) == (0, 0)
    assert overall["a"]["success"] == 4 and overall["b"]["success"] == 1
    assert round(overall["a"]["interval"]["low"], 4) == 0.5101  # Wilson 4/4
    assert overall["p_value"] == 0.25  # 2 * (1/2)^3
    assert overall["verdict"].startswith("no difference detectable at the 5% level")
    assert list(result["suites"]) == ["libero_10"]
    human = _compare(a.root, b.root)
    assert human.returncode == 0 and human.stdout == ""
    said = " ".join(human.stderr.split())
    assert "3 discordant pair(s) favour A, 0 favour B (exact McNemar p = 0.25)" in said
    assert max(len(line) for line in human.stderr.splitlines()) <= 80


def test_a_clear_difference_is_called_with_its_direction(tmp_path: Path) -> None:
    n = 130
    wins: list[Outcome | None] = ["success"] * 20
    losses: list[Outcome | None] = ["failure"] * n
    a, _ = _run(tmp_path, "a", losses, kind="all")
    b, _ = _run(tmp_path, "b", wins + losses[20:], kind="all")
    comparison = compare_runs(a.root, b.root)
    overall = comparison.overall
    assert (overall.paired, overall.only_a_succeeded, overall.only_b_succeeded) == (n, 0, 20)
    assert overall.p_value == 2 * 0.5**20
    assert overall.verdict.startswith("B succeeds more often: 20 of 20 discordant pairs")
    assert sum(s.paired for s in comparison.suites.values()) == n
    same = compare_runs(a.root, a.root).overall
    assert same.p_value == 1.0 and "no discordant pair" in same.verdict


def test_runs_with_other_protocol_settings_are_refused_unless_allowed(tmp_path: Path) -> None:
    a, _ = _run(tmp_path, "a", ["success"] * 5)
    b, _ = _run(tmp_path, "b", ["failure"] * 5)
    manifest = b.read_manifest()
    manifest["settings"]["replan_interval"] = 8
    manifest["settings"]["invalid_action_handling"] = "terminal"
    b.manifest_path.write_text(json.dumps(manifest))
    refused = _compare(a.root, b.root)
    assert refused.returncode == 5
    said = " ".join(refused.stderr.split())
    assert "replan_interval: 5 vs 8" in said and "invalid_action_handling" in said
    allowed = _compare(a.root, b.root, "--allow-different-settings", "--json")
    assert allowed.returncode == 0, allowed.stderr
    differences = json.loads(allowed.stdout)["settings_differences"]
    assert differences == {
        "replan_interval": [5, 8],
        "invalid_action_handling": ["feedback", "terminal"],
    }
    c, _ = _run(tmp_path, "c", ["success"] * 2, kind="fast")
    other_plan = _compare(a.root, c.root)
    assert other_plan.returncode == 5 and "plan cases: 5 vs 2" in " ".join(
        other_plan.stderr.split()
    )
    not_a_run = _compare(a.root, tmp_path)
    assert not_a_run.returncode == 2 and "not a run directory" in not_a_run.stderr
