"""The basic reporter: success with its denominators, from result documents alone.

It needs the manifest, the plan and the result documents (plus recorded leak
disclosures); no event log. A case counts once, by its latest attempt that left a
result document, in exactly one of four standings:

    selected  = completed + errored + unattempted
    completed = success + failure

`errored` is every case whose latest result is an error: a typed policy, protocol,
timeout or infrastructure error, an attempt recorded as interrupted or as lost with its
worker (`campaign/interrupted.py`), and a result document that cannot be read or
validated (`corrupt`, a part of `errored`: a resume records it as interrupted, so the
count does not move). `unattempted` is every case without a result document (never
started, or started and not yet recorded). Two success rates are stated: over
selected (the headline of a complete run: every error and every unattempted case
counts as not a success) and over completed.

Each tally also carries the provider usage of its cases' results (`results/usage.py`:
what the gateway metered, and which results nothing metered, null and never zero); the
report adds the run's price table and network from its manifest, and the usage of the
attempts a later one superseded (spent, though not counted in the rates).
"""

from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, Any, Literal, get_args

from mailroom.orchestrator.catalog.cases import Case
from mailroom.orchestrator.families.base import UnknownBenchmarkError
from mailroom.orchestrator.families.kept import pin_run_catalog
from mailroom.orchestrator.families.plans import parse_plan
from mailroom.orchestrator.families.registry import family
from mailroom.orchestrator.records.disclosures import disclosed_attempts
from mailroom.orchestrator.records.event_log import read_log
from mailroom.orchestrator.records.layout import AttemptPaths
from mailroom.orchestrator.records.manifest import ProviderGatewayRecord
from mailroom.orchestrator.records.result import (
    SUMMED_COUNTERS,
    EpisodeResult,
    MemoryEnforced,
    ResultSimulator,
    WritableSpace,
)
from mailroom.orchestrator.records.run_directory import AttemptRecord, CorruptResult, RunDirectory
from mailroom.orchestrator.results.proportions import Interval, wilson_interval
from mailroom.orchestrator.results.usage import (
    UNMETERED_DEFINITIONS,
    UsageSummary,
    summarize_usage,
)
from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

Standing = Literal["success", "failure", "errored", "unattempted"]
Rate = Annotated[float, Field(ge=0, le=1)]
Count = Annotated[int, Field(ge=0)]

DEFINITIONS: dict[str, str] = {
    "selected": "cases in the plan = completed + errored + unattempted",
    "completed": "cases whose latest result is a success or a failure = success + failure",
    "errored": (
        "cases whose latest result is an error (policy, protocol, timeout, infrastructure, "
        "interrupted, worker lost) or is corrupt"
    ),
    "corrupt": "errored cases whose latest result document is unreadable or invalid",
    "unrecorded": (
        "errored cases with no result yet whose attempt an actor saw while no launch runs: "
        "interrupted, and `resume` records them so (never re-run)"
    ),
    "unattempted": "cases without a result document (and not unrecorded)",
    "in_progress": "unattempted cases whose attempt runs now (a launch holds the run)",
    "success_rate_over_selected": "success / selected (the headline of a complete run)",
    "success_rate_over_completed": "success / completed",
    "interval": (
        "Wilson score 95% confidence interval of a success rate (each case one Bernoulli "
        "trial; the cases' initial states and seeds are not independent draws of a task "
        "when a plan repeats a task)"
    ),
    "not_blinded": "cases whose latest attempt was disclosed or ran not blinded",
    "not_confined": "cases whose latest attempt's actor was not in the orchestrator's sandbox",
    "simulators": (
        "cases with a result by how its simulator was held: parked (its task's shared "
        "simulator, docs/parking.md), dedicated (its own), none (the episode never started), "
        "unknown (a result before mailroom.episode_result/v5 does not say)"
    ),
    "limits": (
        "cases with a result by whether the kernel enforced its actor's limits: memory "
        "(enforced: a memory cgroup held it to the profile's ceiling; not enforced) and "
        "writable_space (kernel: its scratch/, /tmp and /dev/shm a tmpfs bounded in bytes "
        "and inodes; sampled: the scratch quota checked while the orchestrator waits); an "
        "actor not started by the orchestrator is not enforced, sampled; unknown (a result "
        "before mailroom.episode_result/v6 does not say)"
    ),
    "provider_usage": (
        "what the provider gateway metered of the results' actors, from the provider's own "
        "usage fields: totals over the metered results (null, never 0, when none was), "
        "means per metered episode, the cost in USD by the run's price table (null where an "
        "answer could not be priced: cost_notes say why) per episode (over the priced "
        "episodes) and per success (the total over the successes among the metered "
        "episodes), per answering model, and whether every answer named the declared model; "
        "unmetered counts the results nothing metered, by why: "
        + "; ".join(f"{k}: {v}" for k, v in UNMETERED_DEFINITIONS.items())
        + "; provider_budget_truncations: episodes truncated by the method's declared "
        "provider budget; provider_unavailable_errors: episodes the model provider failed "
        "(infrastructure_error provider_unavailable: the infrastructure's, not the "
        "method's); host_network: results whose actor had the host's network (unmetered, "
        "not confined on the network)"
    ),
    "superseded_usage": (
        "provider usage of the superseded attempts' results: spent, not counted in any rate"
    ),
}
# How a case's simulator was held, in the report's words, in the order they are shown.
SIMULATOR_UNKNOWN = "unknown"
SIMULATOR_LABELS: tuple[str, ...] = (*get_args(ResultSimulator), SIMULATOR_UNKNOWN)
# Whether the kernel enforced an actor's limits, in the report's words, in order.
LIMITS_UNKNOWN = "unknown"
LIMIT_LABELS: dict[str, tuple[str, ...]] = {
    "memory": (*get_args(MemoryEnforced), LIMITS_UNKNOWN),
    "writable_space": (*get_args(WritableSpace), LIMITS_UNKNOWN),
}


@dataclass(frozen=True)
class CaseCount:
    """One case of the plan, as it counts: its latest attempt that left a result document."""

    suite: str
    attempt_id: str | None
    result: EpisodeResult | CorruptResult | None
    disclosed: bool
    # With no result: the newest attempt an actor saw, running now or interrupted.
    pending: Literal["in_progress", "interrupted"] | None = None

    @property
    def standing(self) -> Standing:
        if self.result is None:
            return "errored" if self.pending == "interrupted" else "unattempted"
        if isinstance(self.result, CorruptResult) or self.result.outcome == "error":
            return "errored"
        return self.result.outcome

    @property
    def blinded(self) -> bool:
        if self.disclosed:
            return False
        return not isinstance(self.result, EpisodeResult) or self.result.blinded


def _rate(numerator: int, denominator: int) -> float | None:
    return numerator / denominator if denominator else None


class Tally(BaseModel):
    """A suite's (or the whole plan's) cases by standing, with both success rates."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    selected: Count = 0
    completed: Count = 0
    success: Count = 0
    failure: Count = 0
    errored: Count = 0
    corrupt: Count = 0
    unrecorded: Count = 0
    unattempted: Count = 0
    in_progress: Count = 0
    not_blinded: Count = 0
    # Attempts whose actor was not confined by the orchestrator's sandbox: `none`,
    # `external`, or a v1 result written before confinement was recorded.
    not_confined: Count = 0
    success_rate_over_selected: Rate | None = None
    success_rate_over_completed: Rate | None = None
    # Wilson 95% intervals of the two rates (None where the rate is).
    success_rate_over_selected_interval: Interval | None = None
    success_rate_over_completed_interval: Interval | None = None
    counters: dict[str, int] = Field(default_factory=lambda: dict.fromkeys(SUMMED_COUNTERS, 0))
    # What the provider gateway metered of these cases' results, and which it did not.
    provider_usage: UsageSummary = Field(default_factory=UsageSummary)

    @model_validator(mode="after")
    def _denominators_add_up(self) -> Tally:
        if self.selected != self.completed + self.errored + self.unattempted:
            raise ValueError("selected must equal completed + errored + unattempted")
        if self.completed != self.success + self.failure:
            raise ValueError("completed must equal success + failure")
        if self.corrupt + self.unrecorded > self.errored:
            raise ValueError("corrupt and unrecorded cases are a part of the errored ones")
        if self.in_progress > self.unattempted:
            raise ValueError("cases in progress are a part of the unattempted ones")
        rates = (self.success_rate_over_selected, self.success_rate_over_completed)
        if rates != (_rate(self.success, self.selected), _rate(self.success, self.completed)):
            raise ValueError("a success rate does not match its counts")
        intervals = (
            self.success_rate_over_selected_interval,
            self.success_rate_over_completed_interval,
        )
        if intervals != _intervals(self.success, self.selected, self.completed):
            raise ValueError("a success rate's interval does not match its counts")
        return self

    @model_validator(mode="before")
    @classmethod
    def _intervals_from_counts(cls, data: Any) -> Any:
        """Intervals left out are computed from the counts (given ones are checked)."""
        if isinstance(data, dict) and "success_rate_over_selected_interval" not in data:
            counts = [data.get(k, 0) for k in ("success", "selected", "completed")]
            if all(isinstance(n, int) and n >= 0 for n in counts) and counts[0] <= min(counts[1:]):
                low, high = _intervals(*counts)
                data = {
                    **data,
                    "success_rate_over_selected_interval": low,
                    "success_rate_over_completed_interval": high,
                }
        return data


def _intervals(
    success: int, selected: int, completed: int
) -> tuple[Interval | None, Interval | None]:
    return wilson_interval(success, selected), wilson_interval(success, completed)


def tally(cases: Sequence[CaseCount]) -> Tally:
    standings = [case.standing for case in cases]
    results = [case.result for case in cases if isinstance(case.result, EpisodeResult)]
    success, failure = standings.count("success"), standings.count("failure")
    return Tally(
        selected=len(cases),
        completed=success + failure,
        success=success,
        failure=failure,
        errored=standings.count("errored"),
        corrupt=sum(isinstance(case.result, CorruptResult) for case in cases),
        unrecorded=sum(c.result is None and c.pending == "interrupted" for c in cases),
        unattempted=standings.count("unattempted"),
        in_progress=sum(c.result is None and c.pending == "in_progress" for c in cases),
        not_blinded=sum(case.attempt_id is not None and not case.blinded for case in cases),
        not_confined=sum(not result.confined for result in results),
        success_rate_over_selected=_rate(success, len(cases)),
        success_rate_over_completed=_rate(success, success + failure),
        counters={
            name: sum(int(getattr(result.counters, name)) for result in results)
            for name in SUMMED_COUNTERS
        },
        provider_usage=summarize_usage(results),
    )


class Report(BaseModel):
    model_config = ConfigDict(extra="forbid")

    run_id: str
    profile: str
    capability_score: bool
    plan_kind: str
    complete: bool
    overall: Tally
    suites: dict[str, Tally]
    # LIBERO-Plus cases by perturbation category and LIBERO-Para cases by paraphrase
    # cell, keyed "suite/category" and "libero_para/cell".
    categories: dict[str, Tally] = Field(default_factory=dict)
    definitions: dict[str, str] = Field(default_factory=lambda: dict(DEFINITIONS))
    corrupt_results: list[dict[str, str]]
    superseded_attempts: list[str]
    not_blinded_attempts: list[str]
    not_confined_attempts: list[str]
    confinement_modes: dict[str, int]
    # Cases with a result by how its simulator was held (`SIMULATOR_LABELS`, none at 0).
    simulators: dict[str, int] = Field(default_factory=dict)
    # Cases with a result by whether the kernel enforced its actor's limits, per limit
    # (`LIMIT_LABELS`, none at 0).
    limits: dict[str, dict[str, int]] = Field(default_factory=dict)
    # What the run's actors reached their provider through (its manifest's, v6 on; None
    # without a gateway, or with a record that cannot be read: `provider_gateway_problem`).
    provider_gateway: ProviderGatewayRecord | None = None
    provider_gateway_problem: str | None = None
    # The network the run's manifest declares for its actors (None: not recorded).
    network: str | None = None
    # The provider usage of the attempts a later attempt of their case superseded.
    superseded_usage: UsageSummary = Field(default_factory=UsageSummary)

    def tally_rows(self) -> list[tuple[str, str | None, Tally]]:
        """Each suite, then its groups (categories, cells) under it, then overall (suite
        "overall"): how a report's table is laid out, wherever it is shown."""
        rows: list[tuple[str, str | None, Tally]] = []
        for suite, tallied in sorted(self.suites.items()):
            rows.append((suite, None, tallied))
            for key, grouped in sorted(self.categories.items()):
                if key.startswith(f"{suite}/"):
                    rows.append((suite, key.removeprefix(f"{suite}/"), grouped))
        rows.append(("overall", None, self.overall))
        return rows


def confinement_label(result: EpisodeResult) -> str:
    """How an attempt was confined, in the report's words (a sandbox's network said
    when it had one: the host's, or the provider gateway as its only route out)."""
    record = result.confinement
    if record is None:
        return "unrecorded"  # not recorded: its actor ran as the evaluator's own user
    if record.mode == "sandbox" and record.network == "host":
        return "sandbox (host network)"
    if record.mode == "sandbox" and record.network == "gateway":
        return "sandbox (provider gateway)"
    return record.mode


def simulator_label(result: EpisodeResult) -> str:
    """How an attempt's simulator was held, in the report's words: `parked`,
    `dedicated`, `none` (its episode never started), or `unknown`: a result before v5
    does not say, and a value outside those three is never repeated."""
    held = result.simulator
    if isinstance(held, str) and held in get_args(ResultSimulator):
        return held
    return SIMULATOR_UNKNOWN


def limit_labels(result: EpisodeResult) -> dict[str, str]:
    """Whether the kernel enforced an attempt's actor's limits, per limit, in the
    report's words (`LIMIT_LABELS`): `unknown` for a result before v6."""
    enforcement = result.enforcement
    if enforcement is None:
        return {limit: LIMITS_UNKNOWN for limit in LIMIT_LABELS}
    return {"memory": enforcement.memory, "writable_space": enforcement.writable_space}


@dataclass(frozen=True)
class LatestResults:
    """Per case, the latest attempt that left a result document (whole or corrupt)."""

    by_case: dict[str, tuple[str, EpisodeResult | CorruptResult]]
    superseded: list[str]
    corrupt: list[CorruptResult]
    # Per case, its newest attempt when that has no result and an actor saw it.
    seen_without_result: dict[str, str]
    # The readable results of the superseded attempts (their usage was spent all the same).
    superseded_results: list[EpisodeResult] = field(default_factory=list)


def latest_results(run: RunDirectory) -> LatestResults:
    by_case: dict[str, tuple[str, EpisodeResult | CorruptResult]] = {}
    superseded: list[str] = []
    corrupt: list[CorruptResult] = []
    seen: dict[str, str] = {}
    earlier: list[EpisodeResult] = []
    for record in run.attempts():  # in attempt order per case
        seen.pop(record.case_id, None)
        if record.result is None:
            if record.actor_saw_anything():
                seen[record.case_id] = record.attempt_id
            continue
        if isinstance(record.result, CorruptResult):
            corrupt.append(record.result)
        if record.case_id in by_case:
            superseded_id, superseded_result = by_case[record.case_id]
            superseded.append(superseded_id)
            if isinstance(superseded_result, EpisodeResult):
                earlier.append(superseded_result)
        by_case[record.case_id] = (record.attempt_id, record.result)
    return LatestResults(by_case, superseded, corrupt, seen, earlier)


def case_counts(
    cases: Sequence[Case], latest: LatestResults, disclosed: set[str], *, run_in_use: bool
) -> list[CaseCount]:
    """Each case by its latest result; a case without one whose newest attempt an actor
    saw is in progress while a launch holds the run, else interrupted (errored)."""
    pending: Literal["in_progress", "interrupted"] = "in_progress" if run_in_use else "interrupted"
    counts: list[CaseCount] = []
    for case in cases:
        attempt_id, result = latest.by_case.get(case.case_id, (None, None))
        seen = result is None and case.case_id in latest.seen_without_result
        counts.append(
            CaseCount(
                case.suite, attempt_id, result, attempt_id in disclosed, pending if seen else None
            )
        )
    return counts


def run_status(run: RunDirectory) -> dict[str, int]:
    """`mailroom status`: the plan's cases in the report's words, without reading the
    manifest's profile (a run whose launch is still starting has a plan already)."""
    cases = parse_plan(run.plan_path.read_bytes(), check_catalog=False).to_cases()
    in_use = run.in_use()
    counts = case_counts(cases, latest_results(run), disclosed_attempts(run), run_in_use=in_use)
    totals = tally(counts)
    keys = ("selected", "completed", "errored", "corrupt", "unrecorded", "unattempted")
    state = {key: int(getattr(totals, key)) for key in (*keys, "in_progress")}
    # The same cases as a launch sees them: live now (started, shown or not yet),
    # queued for a slot, done (a result, errored included).
    newest = {record.case_id: record for record in run.attempts()}
    live: list[AttemptRecord] = []
    if in_use:
        live = [newest[c.case_id] for c in cases if c.case_id in newest]
        live = [record for record in live if record.result is None]
    state["live"] = min(len(live), state["unattempted"])
    # Of those, the ones that share their task's serving simulator: each is parked as
    # values whenever it waits for its actor (`sim.parked`).
    state["parked"] = min(sum(_started_parked(record) for record in live), state["live"])
    state["queued"] = state["unattempted"] - state["live"]
    state["done"] = state["completed"] + state["errored"]
    return state


def _started_parked(record: AttemptRecord) -> bool:
    """Whether the attempt's episode started on its task's shared simulator, as its
    `episode_started` event says."""
    for event in read_log(AttemptPaths(record.directory).events).before_first_unreadable():
        if event.get("event") == "episode_started":
            return event.get("simulator") == "parked"
    return False


def case_group(case: Case, result: EpisodeResult | CorruptResult | None) -> str | None:
    """The group a case is also reported in, as its family groups it (a LIBERO-Plus
    case's perturbation category, a LIBERO-Para case's paraphrase cell; None for a
    family without groups)."""
    try:
        owner = family(case.benchmark)
    except UnknownBenchmarkError:  # a family no longer installed here
        return "unknown"
    task_name = result.case.task_name if isinstance(result, EpisodeResult) else None
    return owner.report_group(case, task_name)


def _provider_gateway(manifest: dict[str, Any]) -> tuple[ProviderGatewayRecord | None, str | None]:
    """The run's gateway record (a v6 manifest's; None before v6 or without one), or why
    it cannot be read: the rest of the report stands either way."""
    recorded = manifest.get("provider_gateway")
    if recorded is None:
        return None, None
    try:
        return ProviderGatewayRecord.model_validate(recorded), None
    except ValidationError as exc:
        return None, f"the manifest's provider_gateway cannot be read: {exc.errors()[0]['msg']}"


def _run_network(manifest: dict[str, Any]) -> str | None:
    confinement = manifest.get("confinement")
    network = confinement.get("network") if isinstance(confinement, dict) else None
    return network if isinstance(network, str) else None


def build_report(run_dir: Path) -> Report:
    """Raises `OSError`, `ValueError` (a kept catalog that disagrees with the manifest
    among them) and `KeyError` for a run that cannot be read."""
    pin_run_catalog(run_dir)  # a case without a result is named by the run's kept catalog
    run = RunDirectory(run_dir)
    manifest: dict[str, Any] = run.read_manifest()
    plan = parse_plan(run.plan_path.read_bytes(), check_catalog=False)
    latest = latest_results(run)
    cases = case_counts(plan.to_cases(), latest, disclosed_attempts(run), run_in_use=run.in_use())
    by_suite: dict[str, list[CaseCount]] = defaultdict(list)
    modes: dict[str, int] = defaultdict(int)
    held: dict[str, int] = defaultdict(int)
    limits: dict[str, dict[str, int]] = {limit: defaultdict(int) for limit in LIMIT_LABELS}
    not_confined: list[str] = []
    by_category: dict[str, list[CaseCount]] = defaultdict(list)
    for case, selected in zip(cases, plan.to_cases(), strict=True):
        by_suite[case.suite].append(case)
        group = case_group(selected, case.result)
        if group is not None:
            by_category[f"{case.suite}/{group}"].append(case)
        if isinstance(case.result, EpisodeResult) and case.attempt_id is not None:
            modes[confinement_label(case.result)] += 1
            held[simulator_label(case.result)] += 1
            for limit, label in limit_labels(case.result).items():
                limits[limit][label] += 1
            if not case.result.confined:
                not_confined.append(case.attempt_id)
    overall = tally(cases)
    gateway, gateway_problem = _provider_gateway(manifest)
    return Report(
        run_id=str(manifest.get("run_id", run_dir.name)),
        profile=str(manifest["profile"]["name"]),
        capability_score=bool(manifest["profile"]["capability_score"]),
        plan_kind=plan.kind,
        complete=overall.unattempted == 0,
        overall=overall,
        suites={suite: tally(group) for suite, group in by_suite.items()},
        categories={key: tally(group) for key, group in by_category.items()},
        corrupt_results=[{"file": str(c.path), "reason": c.reason} for c in latest.corrupt],
        superseded_attempts=sorted(latest.superseded),
        not_blinded_attempts=sorted(
            c.attempt_id for c in cases if c.attempt_id is not None and not c.blinded
        ),
        not_confined_attempts=sorted(not_confined),
        confinement_modes=dict(sorted(modes.items())),
        simulators={label: held[label] for label in SIMULATOR_LABELS if held[label]},
        limits={
            limit: {label: limits[limit][label] for label in labels if limits[limit][label]}
            for limit, labels in LIMIT_LABELS.items()
        },
        provider_gateway=gateway,
        provider_gateway_problem=gateway_problem,
        network=_run_network(manifest),
        superseded_usage=summarize_usage(latest.superseded_results),
    )


def report_json(report: Report) -> str:
    return json.dumps(report.model_dump(mode="json"), indent=2, sort_keys=True)
