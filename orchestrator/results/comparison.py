"""Compares two runs on the cases they share, per suite and overall.

Both success rates with their intervals, the discordant pairs and an exact McNemar test;
and what the paired cases cost where the provider gateway priced both sides (`PairedCost`:
the totals, each side's mean per episode and their difference, over the cases priced in
both runs; the rest counted by why, never taken as free).

A case is paired when both runs hold a result for it (success, failure or errored; an
errored case is not a success, as in the rate over selected). Cases unattempted in
either run are left out and counted. Runs whose protocol settings differ measure
different things: they are refused unless the caller allows it, and the differences
are named either way.
"""

from __future__ import annotations

import math
from collections import defaultdict
from pathlib import Path
from typing import Any, Literal

from mailroom.orchestrator.families.kept import pin_run_catalog
from mailroom.orchestrator.families.plans import parse_plan
from mailroom.orchestrator.records.disclosures import disclosed_attempts
from mailroom.orchestrator.records.result import EpisodeResult, ProviderUsage
from mailroom.orchestrator.records.run_directory import RunDirectory, not_a_run_directory
from mailroom.orchestrator.results.proportions import Interval, mcnemar_exact, wilson_interval
from mailroom.orchestrator.results.reporter import (
    CaseCount,
    case_counts,
    case_group,
    latest_results,
)
from mailroom.orchestrator.results.usage import usd_text
from pydantic import BaseModel, ConfigDict, Field

# What an episode's outcome depends on besides the actor (the plan's cases apart).
PROTOCOL_SETTINGS = (
    "budget_mode",
    "max_policy_calls",
    "replan_interval",
    "max_chunk",
    "proprio",
    "invalid_action_handling",
)
ALPHA = 0.05


class SettingsDifferError(ValueError):
    """The two runs' protocol settings or plan cases differ."""

    def __init__(self, differences: dict[str, list[Any]]) -> None:
        self.differences = differences
        named = "; ".join(f"{k}: {v[0]!r} vs {v[1]!r}" for k, v in differences.items())
        super().__init__(f"the runs' protocol settings differ ({named})")


class ArmRate(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    success: int
    cases: int
    rate: float | None
    interval: Interval | None


class PairedTally(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    paired: int
    a: ArmRate
    b: ArmRate
    both_succeeded: int
    only_a_succeeded: int
    only_b_succeeded: int
    neither_succeeded: int
    p_value: float
    verdict: str


class PairedCost(BaseModel):
    """What paired cases cost in each run, by the runs' price tables (USD).

    Over the cases priced in both runs (metered by the gateway, every answer priced):
    each side's total and mean per episode, and the difference of the means (B - A: how
    much more B spent per episode). A paired case either run did not meter (an external
    actor, no gateway, an older result, a corrupt result) or could not price is left out
    of all three and counted per side; with no case priced in both they are null.
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    paired: int
    priced_in_both: int
    not_metered_a: int
    not_metered_b: int
    unpriced_a: int
    unpriced_b: int
    total_a_usd: float | None
    total_b_usd: float | None
    mean_a_usd: float | None
    mean_b_usd: float | None
    difference_usd: float | None


def _cost(count: CaseCount) -> tuple[Literal["not_metered", "unpriced", "priced"], float]:
    result = count.result
    if not isinstance(result, EpisodeResult) or not isinstance(result.usage, ProviderUsage):
        return "not_metered", 0.0
    if result.usage.cost is None:
        return "unpriced", 0.0
    return "priced", result.usage.cost


def paired_cost(pairs: list[tuple[CaseCount, CaseCount]]) -> PairedCost:
    """The cost of `pairs` (each a case's counted result in A and in B)."""
    a_costs: list[float] = []
    b_costs: list[float] = []
    standing: dict[str, int] = defaultdict(int)
    for count_a, count_b in pairs:
        (kind_a, cost_a), (kind_b, cost_b) = _cost(count_a), _cost(count_b)
        standing[f"{kind_a}_a"] += 1
        standing[f"{kind_b}_b"] += 1
        if kind_a == kind_b == "priced":
            a_costs.append(cost_a)
            b_costs.append(cost_b)
    n = len(a_costs)
    total_a = round(math.fsum(a_costs), 9) if n else None
    total_b = round(math.fsum(b_costs), 9) if n else None
    mean_a = None if total_a is None else total_a / n
    mean_b = None if total_b is None else total_b / n
    return PairedCost(
        paired=len(pairs),
        priced_in_both=n,
        not_metered_a=standing["not_metered_a"],
        not_metered_b=standing["not_metered_b"],
        unpriced_a=standing["unpriced_a"],
        unpriced_b=standing["unpriced_b"],
        total_a_usd=total_a,
        total_b_usd=total_b,
        mean_a_usd=mean_a,
        mean_b_usd=mean_b,
        difference_usd=None if mean_a is None or mean_b is None else mean_b - mean_a,
    )


def _left_out(cost: PairedCost) -> str:
    """The paired cases left out of the cost, per side: "A 2 not metered; B 1 unpriced"."""
    sides = []
    for side, not_metered, unpriced in (
        ("A", cost.not_metered_a, cost.unpriced_a),
        ("B", cost.not_metered_b, cost.unpriced_b),
    ):
        parts = []
        if not_metered:
            parts.append(f"{not_metered} not metered")
        if unpriced:
            parts.append(f"{unpriced} unpriced")
        if parts:
            sides.append(f"{side} {' and '.join(parts)}")
    return "; ".join(sides)


def paired_cost_text(cost: PairedCost) -> str:
    """The paired cost in one line of words (plain text)."""
    if cost.paired == 0:
        return "cost: no paired case"
    left = _left_out(cost)
    if cost.priced_in_both == 0:
        return f"cost: none of the {cost.paired} paired cases was priced in both runs ({left})"
    said = (
        f"cost over the {cost.priced_in_both} of {cost.paired} paired cases priced in both "
        f"runs: A {usd_text(cost.total_a_usd)} ({usd_text(cost.mean_a_usd)} per episode), "
        f"B {usd_text(cost.total_b_usd)} ({usd_text(cost.mean_b_usd)} per episode); "
        f"B - A {usd_text(cost.difference_usd, signed=True)} per episode"
    )
    return said + (f"; left out: {left}" if left else "")


class Comparison(BaseModel):
    model_config = ConfigDict(extra="forbid")

    run_a: str
    run_b: str
    profile_a: str
    profile_b: str
    test: str = "exact McNemar (two-sided, conditional on the discordant pairs)"
    alpha: float = ALPHA
    settings_differences: dict[str, list[Any]]
    shared_cases: int
    only_in_a: int
    only_in_b: int
    left_out_unattempted: int
    not_blinded_paired: int
    suites: dict[str, PairedTally]
    # LIBERO-Plus categories and LIBERO-Para cells, keyed "suite/group" as in a report
    # (A's group; "suite/<A's> | <B's>" where the runs name a case's group differently).
    groups: dict[str, PairedTally] = Field(default_factory=dict)
    overall: PairedTally
    # What the paired cases cost, overall and per suite (`PairedCost`).
    cost: PairedCost
    suite_costs: dict[str, PairedCost] = Field(default_factory=dict)


def _arm(success: int, cases: int) -> ArmRate:
    return ArmRate(
        success=success,
        cases=cases,
        rate=success / cases if cases else None,
        interval=wilson_interval(success, cases),
    )


def verdict(only_a: int, only_b: int, p_value: float, paired: int) -> str:
    """The comparison in one line of words."""
    if paired == 0:
        return "no case has a result in both runs: nothing to compare"
    discordant = only_a + only_b
    if discordant == 0:
        return f"the runs agree on all {paired} paired cases: no discordant pair, no difference"
    if p_value < ALPHA:
        better, more = ("A", only_a) if only_a > only_b else ("B", only_b)
        return (
            f"{better} succeeds more often: {more} of {discordant} discordant pairs favour "
            f"it (exact McNemar p = {p_value:.3g} < {ALPHA:g})"
        )
    return (
        f"no difference detectable at the {ALPHA:.0%} level: {only_a} discordant pair(s) "
        f"favour A, {only_b} favour B (exact McNemar p = {p_value:.3g})"
    )


def paired_tally(pairs: list[tuple[bool, bool]]) -> PairedTally:
    both = sum(a and b for a, b in pairs)
    only_a = sum(a and not b for a, b in pairs)
    only_b = sum(b and not a for a, b in pairs)
    p_value = mcnemar_exact(only_a, only_b)
    return PairedTally(
        paired=len(pairs),
        a=_arm(both + only_a, len(pairs)),
        b=_arm(both + only_b, len(pairs)),
        both_succeeded=both,
        only_a_succeeded=only_a,
        only_b_succeeded=only_b,
        neither_succeeded=len(pairs) - both - only_a - only_b,
        p_value=p_value,
        verdict=verdict(only_a, only_b, p_value, len(pairs)),
    )


class _Run:
    def __init__(self, root: Path) -> None:
        run = RunDirectory(root)
        if not run.exists():
            raise FileNotFoundError(not_a_run_directory(root))
        self.manifest = run.read_manifest()
        self.plan = parse_plan(run.plan_path.read_bytes(), check_catalog=False)
        # Each run's groups as its own kept catalog names them (pinned while it is read).
        pin_run_catalog(root)
        cases = self.plan.to_cases()
        counts = case_counts(
            cases, latest_results(run), disclosed_attempts(run), run_in_use=run.in_use()
        )
        self.by_case: dict[str, tuple[str, CaseCount]] = {
            case.case_id: (case.suite, count) for case, count in zip(cases, counts, strict=True)
        }
        self.groups: dict[str, str | None] = {
            case.case_id: case_group(case, count.result)
            for case, count in zip(cases, counts, strict=True)
        }


def settings_differences(a: dict[str, Any], b: dict[str, Any]) -> dict[str, list[Any]]:
    sa, sb = a["settings"], b["settings"]
    return {k: [sa.get(k), sb.get(k)] for k in PROTOCOL_SETTINGS if sa.get(k) != sb.get(k)}


def compare_runs(run_a: Path, run_b: Path, *, allow_different_settings: bool = False) -> Comparison:
    """Raises `SettingsDifferError` (unless allowed), `FileNotFoundError`, `ValueError`."""
    a, b = _Run(run_a), _Run(run_b)
    differences = settings_differences(a.manifest, b.manifest)
    if a.plan.plan_sha256 != b.plan.plan_sha256:
        cases_a, cases_b = set(a.by_case), set(b.by_case)
        if cases_a != cases_b:
            differences["plan cases"] = [len(cases_a), len(cases_b)]
    if differences and not allow_different_settings:
        raise SettingsDifferError(differences)
    shared = [case_id for case_id in a.by_case if case_id in b.by_case]
    by_suite: dict[str, list[tuple[bool, bool]]] = defaultdict(list)
    by_group: dict[str, list[tuple[bool, bool]]] = defaultdict(list)
    counted: dict[str, list[tuple[CaseCount, CaseCount]]] = defaultdict(list)
    left_out = not_blinded = 0
    for case_id in shared:
        suite, count_a = a.by_case[case_id]
        _, count_b = b.by_case[case_id]
        if "unattempted" in (count_a.standing, count_b.standing):
            left_out += 1
            continue
        not_blinded += not (count_a.blinded and count_b.blinded)
        pair = (count_a.standing == "success", count_b.standing == "success")
        by_suite[suite].append(pair)
        counted[suite].append((count_a, count_b))
        group_a, group_b = a.groups[case_id], b.groups[case_id]
        if group_a is not None or group_b is not None:
            named = group_a if group_a == group_b else f"{group_a} | {group_b}"
            by_group[f"{suite}/{named}"].append(pair)
    return Comparison(
        run_a=str(a.manifest.get("run_id", run_a.name)),
        run_b=str(b.manifest.get("run_id", run_b.name)),
        profile_a=str(a.manifest["profile"]["name"]),
        profile_b=str(b.manifest["profile"]["name"]),
        settings_differences=differences,
        shared_cases=len(shared),
        only_in_a=len(a.by_case) - len(shared),
        only_in_b=len(b.by_case) - len(shared),
        left_out_unattempted=left_out,
        not_blinded_paired=not_blinded,
        suites={suite: paired_tally(pairs) for suite, pairs in sorted(by_suite.items())},
        groups={key: paired_tally(pairs) for key, pairs in sorted(by_group.items())},
        overall=paired_tally([pair for pairs in by_suite.values() for pair in pairs]),
        cost=paired_cost([pair for pairs in counted.values() for pair in pairs]),
        suite_costs={suite: paired_cost(pairs) for suite, pairs in sorted(counted.items())},
    )
