"""What a comparison site of several runs shows, read from the run directories alone.

Each run as `mailroom report` counts it (`results/reporter.py`), its identity from its
manifest, its decision latency and wall time per episode (the counted attempt of each
case: the one the report counts); every pair of runs as `mailroom compare` pairs them
(`results/comparison.py`, reused as it is). Runs are grouped by their protocol settings
as `compare` decides comparability: runs of different groups measure different things
and are never paired unless the caller asks (`pair_across_settings`).
"""

from __future__ import annotations

import itertools
import statistics
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from mailroom.measures import percentile
from mailroom.orchestrator.audit.verdict import AuditError, read_verdict
from mailroom.orchestrator.records.event_log import read_log
from mailroom.orchestrator.records.layout import AttemptPaths
from mailroom.orchestrator.records.result import EpisodeResult
from mailroom.orchestrator.records.run_directory import (
    CorruptResult,
    RunDirectory,
    not_a_run_directory,
)
from mailroom.orchestrator.results.comparison import (
    PROTOCOL_SETTINGS,
    Comparison,
    SettingsDifferError,
    compare_runs,
    settings_differences,
)
from mailroom.orchestrator.results.reporter import Report, build_report, latest_results
from mailroom.orchestrator.results.usage import UsageSummary, usd_text
from mailroom.orchestrator.viewer.readable import readable_value
from mailroom.orchestrator.viewer.site import SAFE_NAME

OVERALL = "overall"


@dataclass(frozen=True)
class Spread:
    """A sample's median and 95th percentile (nearest rank), None without samples."""

    samples: int
    median: float | None
    p95: float | None

    @classmethod
    def of(cls, values: list[float]) -> Spread:
        if not values:
            return cls(0, None, None)
        return cls(len(values), statistics.median(values), percentile(values, 0.95))


@dataclass(frozen=True)
class CountedAttempt:
    """A case's latest attempt that left a result (the one the report counts), or its
    newest attempt still without one."""

    attempt_id: str
    suite: str | None
    outcome: str  # success, failure, error, corrupt, or "no result yet"
    result: EpisodeResult | None


@dataclass(frozen=True)
class ComparedRun:
    key: str  # its folder in the site: runs/<key>/
    run_dir: Path
    report: Report
    manifest: dict[str, Any]
    group: int  # its settings group, from 1
    identity: list[tuple[str, str]]
    latency_ms: dict[str, Spread]  # per suite and OVERALL: each decision's latency
    wall_time_s: dict[str, Spread]  # per suite and OVERALL: each counted episode's
    attempts: dict[str, CountedAttempt]  # per case id
    live: bool


@dataclass(frozen=True)
class ComparedPair:
    a: str  # run keys
    b: str
    comparison: Comparison | None
    refused: dict[str, list[Any]]  # why they were not paired (compare's refusal)
    across_settings: bool


@dataclass(frozen=True)
class SettingsGroup:
    number: int
    settings: dict[str, Any]  # PROTOCOL_SETTINGS as the group's runs declare them
    runs: list[str]  # run keys


@dataclass(frozen=True)
class SharedCase:
    case_id: str
    suite: str
    runs: list[str]  # keys of the runs holding an attempt of it, in run order


@dataclass(frozen=True)
class ComparisonData:
    runs: list[ComparedRun]
    groups: list[SettingsGroup]
    pairs: list[ComparedPair]
    shared_cases: list[SharedCase]
    pair_across_settings: bool

    def run(self, key: str) -> ComparedRun:
        return next(run for run in self.runs if run.key == key)

    @property
    def live(self) -> bool:
        return any(run.live for run in self.runs)


def run_key(index: int, run_dir: Path) -> str:
    """A run's folder in the site: its position and a safe form of its folder's name."""
    name = "".join(c if c.isalnum() or c in "_.-" else "_" for c in run_dir.name)[:60]
    return f"{index + 1}-{name.strip('.') or 'run'}"


def _counted_attempts(run: RunDirectory) -> dict[str, CountedAttempt]:
    latest = latest_results(run)
    counted: dict[str, CountedAttempt] = {}
    for case_id, (attempt_id, result) in latest.by_case.items():
        if isinstance(result, CorruptResult):
            counted[case_id] = CountedAttempt(attempt_id, None, "corrupt", None)
        else:
            counted[case_id] = CountedAttempt(attempt_id, result.case.suite, result.outcome, result)
    for case_id, attempt_id in latest.seen_without_result.items():
        counted.setdefault(case_id, CountedAttempt(attempt_id, None, "no result yet", None))
    return counted


def _latencies(run: RunDirectory, attempt_id: str) -> list[float]:
    log = read_log(AttemptPaths(run.episode_dir(attempt_id)).events, kinds=("decision_served",))
    values = [record.get("latency_ms") for record in log.records]
    return [float(v) for v in values if isinstance(v, int | float) and not isinstance(v, bool)]


def _times(
    run: RunDirectory, attempts: dict[str, CountedAttempt]
) -> tuple[dict[str, Spread], dict[str, Spread]]:
    latency: dict[str, list[float]] = defaultdict(list)
    wall: dict[str, list[float]] = defaultdict(list)
    for attempt in attempts.values():
        if attempt.result is None or attempt.suite is None:
            continue
        decisions = _latencies(run, attempt.attempt_id)
        for key in (attempt.suite, OVERALL):
            latency[key] += decisions
            wall[key].append(attempt.result.wall_time_s)
    return (
        {key: Spread.of(values) for key, values in latency.items()},
        {key: Spread.of(values) for key, values in wall.items()},
    )


def audit_verdict(run_dir: Path) -> str:
    """The run's latest recorded blinding audit, in words."""
    try:
        verdict = read_verdict(run_dir)
    except AuditError as exc:  # shown, never raised: the rest of the site still reads
        return f"unreadable verdict: {exc}"
    if verdict is None:
        return "not audited (mailroom audit)"
    if verdict.clean:
        return f"clean: {verdict.attempts_scanned} attempts, {verdict.files_scanned} files"
    parts = []
    if verdict.leaks:
        parts.append(f"{len(verdict.leaks)} leak(s)")
    if verdict.unverifiable:
        parts.append(f"{len(verdict.unverifiable)} unverifiable")
    return "not clean: " + ", ".join(parts)


def usage_rows(u: UsageSummary) -> list[tuple[str, str]]:
    """A run's provider usage in three identity rows: how much was metered, and its cost
    per episode and per success with their n ("not metered" where nothing was: null)."""
    if u.metered == 0:
        return [
            ("provider usage", f"not metered in any of {u.results} results"),
            ("cost per episode", "not metered"),
            ("cost per success", "not metered"),
        ]
    return [
        ("provider usage", f"metered in {u.metered} of {u.results} results"),
        ("cost per episode", f"{usd_text(u.cost_per_episode_usd)} (n {u.priced})"),
        (
            "cost per success",
            f"{usd_text(u.cost_per_success_usd)} (n {u.successes_metered})",
        ),
    ]


def _identity(manifest: dict[str, Any], report: Report, run_dir: Path) -> list[tuple[str, str]]:
    settings = manifest.get("settings", {})
    protocol = manifest.get("protocol", {})
    confinement = manifest.get("confinement") or {}
    blinding = manifest.get("blinding", {})
    profile = manifest.get("profile", {})
    declaration = profile.get("declaration", {}) if isinstance(profile, dict) else {}
    command = manifest.get("volatile", {}).get("actor_command")
    pairs: list[tuple[str, object]] = [
        ("run", report.run_id),
        ("profile", report.profile),
        ("capability score", "yes" if report.capability_score else "no (diagnostic)"),
        ("declared models", declaration.get("declared_models")),
        ("actor command", " ".join(map(str, command)) if isinstance(command, list) else None),
        ("benchmark", protocol.get("benchmark")),
        ("plan", f"{protocol.get('plan_kind', report.plan_kind)}, {protocol.get('cases')} cases"),
        ("plan sha256", protocol.get("plan_sha256")),
        ("budget mode", settings.get("budget_mode")),
        ("max policy calls (D)", settings.get("max_policy_calls")),
        ("replan interval (K)", settings.get("replan_interval")),
        ("max chunk", _max_chunk(settings)),
        ("invalid-action handling", settings.get("invalid_action_handling")),
        ("proprioception", settings.get("proprio")),
        ("response timeout (s)", settings.get("response_timeout_s")),
        ("episode wall time (s)", settings.get("episode_wall_time_s")),
        (
            "confinement",
            f"{readable_value(confinement.get('mode'))}, network "
            f"{readable_value(confinement.get('network'))}",
        ),
        (
            "blinding",
            f"fresh actor per episode: {readable_value(blinding.get('fresh_actor_per_episode'))}"
            f", {readable_value(blinding.get('endpoint_token_bits'))}-bit endpoint names, "
            f"instructions {readable_value(blinding.get('instructions_version'))}; "
            f"not blinded attempts: {len(report.not_blinded_attempts)}",
        ),
        ("audit", audit_verdict(run_dir)),
        ("record", manifest.get("record")),
        ("complete", report.complete),
        *usage_rows(report.overall.provider_usage),
    ]
    return [(label, readable_value(value)) for label, value in pairs]


def _read_run(index: int, run_dir: Path) -> tuple[str, RunDirectory, Report, dict[str, Any]]:
    run = RunDirectory(run_dir)
    if not run.exists():
        raise FileNotFoundError(not_a_run_directory(run_dir))
    return run_key(index, run_dir), run, build_report(run_dir), run.read_manifest()


def _max_chunk(settings: dict[str, Any]) -> object:
    """The most actions a response may carry: a run that leaves `max_chunk` unset (null)
    allows its replan interval (`RunSettings.chunk_limit`)."""
    chunk = settings.get("max_chunk")
    return chunk if chunk is not None else settings.get("replan_interval")


def _groups(manifests: dict[str, dict[str, Any]]) -> list[SettingsGroup]:
    """Runs grouped by their protocol settings (compare's `settings_differences`)."""
    groups: list[SettingsGroup] = []
    for key, manifest in manifests.items():
        for group in groups:
            if not settings_differences(manifests[group.runs[0]], manifest):
                group.runs.append(key)
                break
        else:
            declared = manifest.get("settings", {})
            settings = {name: declared.get(name) for name in PROTOCOL_SETTINGS}
            settings["max_chunk"] = _max_chunk(declared)
            groups.append(SettingsGroup(len(groups) + 1, settings, [key]))
    return groups


def _pair(a: ComparedRun, b: ComparedRun, *, across: bool) -> ComparedPair:
    try:
        comparison = compare_runs(a.run_dir, b.run_dir, allow_different_settings=across)
    except SettingsDifferError as refusal:
        return ComparedPair(a.key, b.key, None, refusal.differences, a.group != b.group)
    return ComparedPair(a.key, b.key, comparison, {}, a.group != b.group)


def read_comparison(run_dirs: list[Path], *, pair_across_settings: bool = False) -> ComparisonData:
    """Raises `OSError`, `ValueError`, `KeyError` for a run that cannot be read."""
    read = [_read_run(index, run_dir) for index, run_dir in enumerate(run_dirs)]
    groups = _groups({key: manifest for key, _, _, manifest in read})
    group_of = {key: group.number for group in groups for key in group.runs}
    runs: list[ComparedRun] = []
    for (key, run, report, manifest), run_dir in zip(read, run_dirs, strict=True):
        attempts = _counted_attempts(run)
        latency, wall = _times(run, attempts)
        runs.append(
            ComparedRun(
                key=key,
                run_dir=run_dir,
                report=report,
                manifest=manifest,
                group=group_of[key],
                identity=_identity(manifest, report, run_dir),
                latency_ms=latency,
                wall_time_s=wall,
                attempts=attempts,
                live=run.in_use(),
            )
        )
    pairs = [
        _pair(a, b, across=pair_across_settings)
        for a, b in itertools.combinations(runs, 2)
        if pair_across_settings or a.group == b.group
    ]
    holders: dict[str, list[str]] = defaultdict(list)
    suites: dict[str, str] = {}
    for run_ in runs:
        for case_id, attempt in run_.attempts.items():
            if SAFE_NAME.match(case_id) and SAFE_NAME.match(attempt.attempt_id):
                holders[case_id].append(run_.key)
                if attempt.suite is not None:
                    suites.setdefault(case_id, attempt.suite)
    shared = [
        SharedCase(case_id, suites.get(case_id, ""), keys)
        for case_id, keys in sorted(holders.items())
        if len(keys) >= 2
    ]
    return ComparisonData(runs, groups, pairs, shared, pair_across_settings)
