"""`mailroom compare` on real run directories (no simulator): pairs on shared cases,
discordant counts, the exact McNemar p-value, the verdict, and refusals."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pytest
from conftest import mailroom_exe
from mailroom.orchestrator.records.result import Outcome
from mailroom.orchestrator.records.run_directory import RunDirectory
from mailroom.orchestrator.results.comparison import (
    PROTOCOL_SETTINGS,
    SettingsDifferError,
    compare_runs,
)
from metered_runs import answer, make_gateway_run, write_metered
from recorded_runs import run_with_outcomes, write_result


def _compare(a: Path, b: Path, *options: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [mailroom_exe(), "compare", str(a), str(b), *options],
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_two_runs_are_paired_on_their_shared_cases(tmp_path: Path) -> None:
    a, _ = run_with_outcomes(tmp_path, "a", ["success", "success", "success", "success", "failure"])
    b, _ = run_with_outcomes(tmp_path, "b", ["success", "failure", "error", "failure", None])
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
    a, _ = run_with_outcomes(tmp_path, "a", losses, kind="all")
    b, _ = run_with_outcomes(tmp_path, "b", wins + losses[20:], kind="all")
    comparison = compare_runs(a.root, b.root)
    overall = comparison.overall
    assert (overall.paired, overall.only_a_succeeded, overall.only_b_succeeded) == (n, 0, 20)
    assert overall.p_value == 2 * 0.5**20
    assert overall.verdict.startswith("B succeeds more often: 20 of 20 discordant pairs")
    assert sum(s.paired for s in comparison.suites.values()) == n
    same = compare_runs(a.root, a.root).overall
    assert same.p_value == 1.0 and "no discordant pair" in same.verdict


def test_runs_with_other_protocol_settings_are_refused_unless_allowed(tmp_path: Path) -> None:
    a, _ = run_with_outcomes(tmp_path, "a", ["success"] * 5)
    b, _ = run_with_outcomes(tmp_path, "b", ["failure"] * 5)
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
    c, _ = run_with_outcomes(tmp_path, "c", ["success"] * 2, kind="fast")
    other_plan = _compare(a.root, c.root)
    assert other_plan.returncode == 5 and "plan cases: 5 vs 2" in " ".join(
        other_plan.stderr.split()
    )
    not_a_run = _compare(a.root, tmp_path)
    assert not_a_run.returncode == 2 and "not a run directory" in not_a_run.stderr


def _tally(overall: Any) -> tuple[int, int, int, int, int]:
    return (
        overall.paired,
        overall.both_succeeded,
        overall.only_a_succeeded,
        overall.only_b_succeeded,
        overall.neither_succeeded,
    )


def test_discordant_pairs_are_counted_in_both_directions(tmp_path: Path) -> None:
    """Pairs favouring A and pairs favouring B in one comparison, each counted on its
    side, and swapping the runs swaps the counts and the arms."""
    a, _ = run_with_outcomes(tmp_path, "a", ["success", "success", "failure", "success", "failure"])
    b, _ = run_with_outcomes(tmp_path, "b", ["failure", "success", "success", "failure", "failure"])
    forward = compare_runs(a.root, b.root).overall
    assert _tally(forward) == (5, 1, 2, 1, 1)
    assert (forward.a.success, forward.b.success) == (3, 2)
    assert forward.p_value == 1.0  # 2 * (C(3,0) + C(3,1)) / 2^3, capped at 1
    assert forward.verdict.startswith("no difference detectable at the 5% level: 2 discordant")
    assert "2 discordant pair(s) favour A, 1 favour B" in forward.verdict
    backward = compare_runs(b.root, a.root).overall
    assert _tally(backward) == (5, 1, 1, 2, 1)
    assert (backward.a.success, backward.b.success) == (2, 3)
    assert "1 discordant pair(s) favour A, 2 favour B" in backward.verdict
    assert backward.a.interval == forward.b.interval and backward.b.interval == forward.a.interval


def test_a_run_compared_with_itself_agrees_on_every_case(tmp_path: Path) -> None:
    outcomes: list[Outcome | None] = ["success", "failure", "error", "success", None]
    a, _ = run_with_outcomes(tmp_path, "a", outcomes)
    done = _compare(a.root, a.root, "--json")
    assert done.returncode == 0, done.stderr
    result: dict[str, Any] = json.loads(done.stdout)
    assert (result["run_a"], result["run_b"]) == ("a", "a")
    assert result["settings_differences"] == {}
    assert (result["shared_cases"], result["only_in_a"], result["only_in_b"]) == (5, 0, 0)
    assert (result["left_out_unattempted"], result["not_blinded_paired"]) == (1, 0)
    overall = result["overall"]
    assert overall["paired"] == 4
    assert (overall["both_succeeded"], overall["neither_succeeded"]) == (2, 2)
    assert (overall["only_a_succeeded"], overall["only_b_succeeded"]) == (0, 0)
    assert overall["a"] == overall["b"] and overall["a"]["success"] == 2
    assert overall["p_value"] == 1.0
    assert overall["verdict"] == (
        "the runs agree on all 4 paired cases: no discordant pair, no difference"
    )


def test_cases_in_one_run_only_are_counted_on_their_side(tmp_path: Path) -> None:
    """The fast plan's 2 cases are among the development plan's 5: compared (allowed, as
    the plans differ), 3 cases are only in the development run, on whichever side."""
    dev, _ = run_with_outcomes(tmp_path, "dev", ["success"] * 5)
    fast, _ = run_with_outcomes(tmp_path, "fast", ["failure"] * 2, kind="fast")
    for first, second, only in ((dev, fast, (3, 0)), (fast, dev, (0, 3))):
        comparison = compare_runs(first.root, second.root, allow_different_settings=True)
        assert (comparison.only_in_a, comparison.only_in_b) == only
        assert comparison.shared_cases == 2 and comparison.overall.paired == 2
        assert comparison.settings_differences == {"plan cases": [5, 2] if first is dev else [2, 5]}


def test_pairs_not_run_blinded_are_counted(tmp_path: Path) -> None:
    """A pair whose result in either run was not blinded is counted once; an unattempted
    case is left out, not counted as unblinded."""
    a, cases = run_with_outcomes(
        tmp_path, "a", ["success", "success", "failure", "failure", "success"]
    )
    b, _ = run_with_outcomes(tmp_path, "b", ["success", "failure", "failure", "success", None])
    for run, index in ((a, 0), (b, 0), (b, 1), (a, 4)):
        path = run.episode_dir(cases[index].attempt_id(1)) / "result.json"
        document = json.loads(path.read_text(encoding="utf-8"))
        document["blinded"] = False
        path.write_text(json.dumps(document), encoding="utf-8")
    comparison = compare_runs(a.root, b.root)
    assert (comparison.not_blinded_paired, comparison.left_out_unattempted) == (2, 1)
    assert comparison.overall.paired == 4
    assert compare_runs(a.root, a.root).not_blinded_paired == 2  # cases 0 and 4


# Each protocol setting with a value other than the default run's.
OTHER_SETTINGS: dict[str, Any] = {
    "budget_mode": "horizon",
    "max_policy_calls": 7,
    "replan_interval": 8,
    "max_chunk": 10,
    "proprio": True,
    "invalid_action_handling": "terminal",
}


def test_every_protocol_setting_is_one_the_refusal_checks() -> None:
    assert set(OTHER_SETTINGS) == set(PROTOCOL_SETTINGS)


@pytest.mark.parametrize("setting", sorted(OTHER_SETTINGS))
def test_each_protocol_setting_that_differs_is_refused(tmp_path: Path, setting: str) -> None:
    a, _ = run_with_outcomes(tmp_path, "a", ["success"] * 5)
    b, _ = run_with_outcomes(tmp_path, "b", ["failure"] * 5)
    manifest = b.read_manifest()
    before = manifest["settings"][setting]
    assert before != OTHER_SETTINGS[setting]
    manifest["settings"][setting] = OTHER_SETTINGS[setting]
    b.manifest_path.write_text(json.dumps(manifest))
    with pytest.raises(SettingsDifferError) as refused:
        compare_runs(a.root, b.root)
    assert refused.value.differences == {setting: [before, OTHER_SETTINGS[setting]]}
    assert f"{setting}: {before!r} vs {OTHER_SETTINGS[setting]!r}" in str(refused.value)
    allowed = compare_runs(a.root, b.root, allow_different_settings=True)
    assert allowed.settings_differences == {setting: [before, OTHER_SETTINGS[setting]]}
    assert allowed.overall.only_a_succeeded == 5


def _priced_run(tmp_path: Path, name: str, costs: list[float | str | None]) -> RunDirectory:
    """A gateway run of the development plan: per case a cost, "unpriced", "external"
    (an external actor's result: not metered) or None (no result)."""
    run, cases = make_gateway_run(tmp_path / name, run_id=name)
    for case, cost in zip(cases, costs, strict=True):
        if cost == "external":
            write_result(run, case, 1, outcome="failure", executed=5, proprio=False)
        elif cost == "unpriced":
            write_metered(run, case, 1, [answer(1, cost=None, note="no price")], outcome="failure")
        elif isinstance(cost, float):
            write_metered(run, case, 1, [answer(1, cost=cost)], outcome="success")
    return run


def test_the_cost_of_the_cases_priced_in_both_runs_and_its_difference(tmp_path: Path) -> None:
    a = _priced_run(tmp_path, "a", [0.1, 0.2, "unpriced", "external", 0.3])
    b = _priced_run(tmp_path, "b", [0.4, 0.1, 0.5, 0.1, None])
    cost = compare_runs(a.root, b.root).cost
    # Case 4 is unattempted in B: not paired; cases 2 and 3 are not priced in A.
    assert (cost.paired, cost.priced_in_both) == (4, 2)
    assert (cost.not_metered_a, cost.unpriced_a, cost.not_metered_b, cost.unpriced_b) == (
        1,
        1,
        0,
        0,
    )
    assert cost.total_a_usd == pytest.approx(0.3) and cost.total_b_usd == pytest.approx(0.5)
    assert cost.mean_a_usd == pytest.approx(0.15) and cost.mean_b_usd == pytest.approx(0.25)
    assert cost.difference_usd == pytest.approx(0.1)
    done = _compare(a.root, b.root, "--json")
    assert done.returncode == 0, done.stderr
    document = json.loads(done.stdout)
    assert document["cost"]["priced_in_both"] == 2
    assert document["suite_costs"]["libero_10"] == document["cost"]
    human = _compare(a.root, b.root)
    said = " ".join(human.stderr.split())
    assert (
        "cost over the 2 of 4 paired cases priced in both runs: A $0.30 ($0.15 per episode), "
        "B $0.50 ($0.25 per episode); B - A +$0.10 per episode; left out: A 1 not metered "
        "and 1 unpriced"
    ) in said
    assert max(len(line) for line in human.stderr.splitlines()) <= 80
    backward = compare_runs(b.root, a.root).cost
    assert backward.difference_usd == pytest.approx(-0.1)


def test_runs_nothing_metered_compare_no_cost_never_a_free_one(tmp_path: Path) -> None:
    a, _ = run_with_outcomes(tmp_path, "a", ["success", "failure", "success", "failure", "success"])
    b, _ = run_with_outcomes(tmp_path, "b", ["failure", "failure", "success", "success", "success"])
    cost = compare_runs(a.root, b.root).cost
    assert (cost.paired, cost.priced_in_both, cost.not_metered_a, cost.not_metered_b) == (
        5,
        0,
        5,
        5,
    )
    for value in (cost.total_a_usd, cost.mean_b_usd, cost.difference_usd):
        assert value is None
    said = " ".join(_compare(a.root, b.root).stderr.split())
    assert (
        "cost: none of the 5 paired cases was priced in both runs (A 5 not metered; B 5 "
        "not metered)"
    ) in said
