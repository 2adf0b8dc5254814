"""`mailroom export --format atif`: each attempt as an agent trajectory in Harbor's ATIF
(v1.7, `atif_models.py`), one folder per attempt:

    <out>/index.json                          what was exported and skipped (mailroom's own)
    <out>/<attempt id>/trajectory.json        the trajectory
    <out>/<attempt id>/images/obs-<n>-<camera>.png   the images delivered, as delivered

A trajectory's steps, in order:

    system   the launch message its actor was handed (the instruction text), at the
             time the actor was started
    ...      the agent's own account before the first observation, if it printed one
    user     policy call n's observation: the document delivered, byte for byte as text,
             and its images (for a run recorded `full`; a minimal record kept none)
    agent    the agent's own account placed at policy call n (each text, thinking, tool
             call with its output), marked `verified: false`: it is what the agent says,
             read from its captured output by its agent's trace parser; up to its tool
             call that names `resp-<n>.json`, the rest after response n
    agent    response n, verbatim, with its verdict and the feedback the next observation
             carried, its decision latency, the model that answered and the tokens and
             cost the gateway metered while observation n was the latest (`metrics`)
    ...      the account after the last observation
    system   the end of the episode: its outcome and termination

`final_metrics` are the gateway's totals for the attempt (every request, also those
before the first observation). ATIF counts a prompt's tokens with its cached ones;
Anthropic reports them apart, so for it `prompt_tokens` is input + cache reads + cache
writes, and the metered figures are kept as they were in the metrics' `extra`. What ATIF
has no field for is in the `extra` of the step or trajectory under `mailroom`, never
dropped: the run's identity, the case, the outcome and counters, the verdicts, and what
the export leaves to other formats (the executed actions, the states and videos:
`--format lerobot` or `parquet`).

An attempt is exported only whole: its evidence trusted (`attempt_evidence.py`) and, when
its gateway metered it, its requests file agreeing with its result; else it is skipped
and listed. Everything an actor wrote (its responses, its account) is data only: text in
a JSON string, bounded by the mailbox and the trace reader. No path of this machine is
written: the actor's endpoint, the mailbox root, the run directory and the checkout are
replaced in every text by `<endpoint>`, `<mailbox-root>`, `<run>` and `<checkout>`.
The export is written into a temporary folder and renamed onto its destination whole.
"""

from __future__ import annotations

import json
import os
import secrets
import shutil
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from mailroom.checkout import CHECKOUT
from mailroom.orchestrator.actors.agent_trace import (
    Clipped,
    declared_trace,
    read_trace,
)
from mailroom.orchestrator.actors.agent_trace import Step as AccountStep
from mailroom.orchestrator.actors.agent_trace import assign as assign_account
from mailroom.orchestrator.records.layout import AttemptPaths
from mailroom.orchestrator.records.result import EpisodeResult, ProviderUsage
from mailroom.orchestrator.records.run_directory import AttemptRecord, RunDirectory
from mailroom.orchestrator.results.atif_models import (
    ATIF_VERSION,
    Agent,
    ContentPart,
    FinalMetrics,
    ImageSource,
    Metrics,
    Observation,
    ObservationResult,
    Step,
    ToolCall,
    Trajectory,
)
from mailroom.orchestrator.results.attempt_evidence import (
    MAX_RESPONSE_BYTES,
    AttemptEvidence,
    DeliveredObservation,
    EvidenceError,
    JudgedDecision,
    delivered_image,
    read_evidence,
    selected_attempts,
)
from mailroom.orchestrator.results.export import (
    DEFAULT_EXPORT_DIR,
    ExportError,
    Skipped,
    load_run,
    publish_folder,
    run_identity,
)
from mailroom.orchestrator.results.provider_requests import (
    RequestLine,
    RequestsFileError,
    read_requests,
)
from mailroom.orchestrator.results.usage import unmetered_reason
from mailroom.timestamps import utc_timestamp

ATIF_EXPORT_FORMAT = "mailroom.atif/v2"
# The versions of this export a destination may hold and be replaced (v1's index named the
# ATIF version `schema_version`, which readers that sniff for ATIF took for a trajectory).
ATIF_EXPORT_FORMATS = frozenset({"mailroom.atif/v1", ATIF_EXPORT_FORMAT})
DEFAULT_ATIF_DIR = "atif"
INDEX_FILE = "index.json"
TRAJECTORY_FILE = "trajectory.json"
IMAGES_DIR = "images"

# Providers whose reported input tokens leave out the cached ones (ATIF counts them in).
_CACHE_APART = frozenset({"anthropic"})

# What the placeholders stand for, said in every trajectory.
PLACEHOLDERS = {
    "<endpoint>": "the actor's endpoint directory (its mailbox), gone after the episode",
    "<mailbox-root>": "the folder the run's endpoints were made in",
    "<run>": "the run directory",
    "<checkout>": "the evaluator's checkout",
}
NOT_IN_ATIF = (
    "the executed actions and the proprioceptive states per control "
    "(mailroom export --format lerobot or parquet)",
    "the camera between observations (the episode videos of a full record; --format lerobot)",
    "each model request's timings and outcome (provider_requests.parquet, --format parquet)",
)


@dataclass(frozen=True)
class ExportedTrajectory:
    attempt_id: str
    file: str  # relative to the export folder
    steps: int
    decisions: int
    account_steps: int
    images: int


@dataclass(frozen=True)
class AtifExportSummary:
    out_dir: Path
    trajectories: list[ExportedTrajectory]
    skipped: list[Skipped] = field(default_factory=list)

    def document(self) -> dict[str, Any]:
        return {
            "format": "atif",
            "atif_version": ATIF_VERSION,
            "out": str(self.out_dir),
            "trajectories": [
                {
                    "attempt_id": t.attempt_id,
                    "file": t.file,
                    "steps": t.steps,
                    "decisions": t.decisions,
                    "account_steps": t.account_steps,
                    "images": t.images,
                }
                for t in self.trajectories
            ],
            "skipped": [{"file": s.file, "reason": s.reason} for s in self.skipped],
        }


# paths of this machine --------------------------------------------------------------------


def _machine_paths(run: RunDirectory, paths: AttemptPaths | None) -> list[tuple[str, str]]:
    """The absolute paths of this machine a trajectory's texts may name (an attempt's
    endpoint with `paths`), longest first, each with its placeholder."""
    found: dict[str, str] = {}
    try:
        mapping = json.loads(paths.endpoint_mapping.read_bytes()) if paths else None
        endpoint = mapping.get("endpoint") if isinstance(mapping, dict) else None
    except (OSError, ValueError):
        endpoint = None
    if isinstance(endpoint, str) and endpoint.startswith("/") and len(endpoint) > 1:
        found[endpoint.rstrip("/")] = "<endpoint>"
        root = os.path.dirname(endpoint.rstrip("/"))
        if root not in ("", "/"):
            found[root] = "<mailbox-root>"
    for path, placeholder in ((run.root, "<run>"), (CHECKOUT, "<checkout>")):
        for spelled in {str(path.absolute()), str(path.resolve())}:
            found.setdefault(spelled, placeholder)
    return sorted(found.items(), key=lambda item: -len(item[0]))


def _without_paths(value: Any, paths: Sequence[tuple[str, str]]) -> Any:
    """`value` with every machine path in its texts (keys too) replaced, and any lone
    surrogate (JSON may encode one) replaced so that the file is UTF-8."""
    if isinstance(value, str):
        for path, placeholder in paths:
            value = value.replace(path, placeholder)
        return value.encode("utf-8", errors="replace").decode("utf-8")
    if isinstance(value, dict):
        return {_without_paths(k, paths): _without_paths(v, paths) for k, v in value.items()}
    if isinstance(value, list):
        return [_without_paths(v, paths) for v in value]
    return value


# reading -----------------------------------------------------------------------------


def _text(data: bytes) -> tuple[str, bool]:
    """Bytes an actor or the evaluator wrote, as text; whether they were not UTF-8."""
    try:
        return data.decode("utf-8"), False
    except UnicodeDecodeError:
        return data.decode("utf-8", errors="replace"), True


def _launch_message(paths: AttemptPaths) -> tuple[str, str | None] | None:
    try:
        document = json.loads(paths.launch_message.read_bytes())
    except FileNotFoundError:
        return None
    except OSError as exc:
        name = paths.relative(paths.launch_message)
        raise EvidenceError(f"{name}: unreadable: {exc.strerror or type(exc).__name__}") from exc
    except ValueError as exc:
        raise EvidenceError(f"{paths.relative(paths.launch_message)}: not JSON") from exc
    text = document.get("instructions") if isinstance(document, dict) else None
    if not isinstance(text, str):
        raise EvidenceError(f"{paths.relative(paths.launch_message)} holds no instructions")
    version = document.get("instructions_version")
    return text, version if isinstance(version, str) else None


def _requests(paths: AttemptPaths, result: EpisodeResult) -> list[RequestLine]:
    try:
        found = read_requests(paths.provider_requests, result.usage)
    except RequestsFileError as exc:
        raise EvidenceError(f"{paths.relative(paths.provider_requests)}: {exc}") from exc
    if found is None and isinstance(result.usage, ProviderUsage):
        raise EvidenceError("its result was metered, but its provider requests file is missing")
    return found.lines if found is not None else []


# steps -------------------------------------------------------------------------------


def _mailroom(kind: str, **fields: Any) -> dict[str, Any]:
    return {"mailroom": {"kind": kind, **{k: v for k, v in fields.items() if v is not None}}}


def _at(seconds: float | None) -> str | None:
    """An event's time as ATIF writes one (None: not a time this machine can write)."""
    if seconds is None:
        return None
    try:
        return utc_timestamp(seconds)
    except (ValueError, OverflowError, OSError):
        return None


def _metrics(lines: Sequence[RequestLine], provider: str) -> Metrics | None:
    """What the gateway metered over `lines` (None: no request said its usage)."""
    said = [ln for ln in lines if ln.input_tokens is not None or ln.output_tokens is not None]
    if not said:
        return None
    inputs = sum(ln.input_tokens or 0 for ln in said)
    cache_read = sum(ln.cache_read_tokens or 0 for ln in said)
    cache_write = sum(ln.cache_write_tokens or 0 for ln in said)
    prompt = inputs + cache_read + cache_write if provider in _CACHE_APART else inputs
    costs = [ln.cost for ln in lines]
    return Metrics(
        prompt_tokens=prompt,
        completion_tokens=sum(ln.output_tokens or 0 for ln in said),
        cached_tokens=cache_read if any(ln.cache_read_tokens is not None for ln in said) else None,
        cost_usd=round(sum(c for c in costs if c is not None), 12)
        if all(c is not None for c in costs)
        else None,
        extra={
            "mailroom": {
                "metered_by": "the provider gateway",
                "provider": provider,
                "input_tokens": inputs,
                "cache_read_tokens": cache_read,
                "cache_write_tokens": cache_write,
                "requests": len(lines),
                "requests_that_said_usage": len(said),
                "cost_unknown_requests": sum(c is None for c in costs),
            }
        },
    )


def _answering_model(lines: Sequence[RequestLine]) -> str | None:
    named = [ln.answered_model for ln in lines if ln.answered_model]
    return named[-1] if named else None


def _omitted(**parts: Clipped | None) -> dict[str, int] | None:
    cut = {name: c.omitted for name, c in parts.items() if c is not None and c.cut}
    return cut or None


def _account_step(step: AccountStep, number: int) -> Step:
    """One step of the agent's own account (unverified), as an ATIF step."""
    extra = _mailroom(
        "agent_account",
        verified=False,
        trace_line=step.line,
        account_kind=step.kind,
        omitted_characters=_omitted(text=step.text, call=step.call, output=step.output),
    )
    text = step.text.text if step.text is not None else ""
    # Every step of the account is the agent's (what it says it was handed, its errors
    # and notes too): an ATIF reader that ignores `extra` must never take one of them
    # for the evaluator's system or user steps.
    if step.kind == "thinking":
        return Step(step_id=number, source="agent", message="", reasoning_content=text, extra=extra)
    if step.kind != "tool":
        return Step(step_id=number, source="agent", message=text, extra=extra)
    call_id = f"account-{number}"
    extra["mailroom"].update(
        {
            k: v
            for k, v in (
                ("exit_code", step.exit_code),
                ("is_error", step.is_error),
                ("status", step.status),
            )
            if v is not None
        }
    )
    results = (
        [ObservationResult(source_call_id=call_id, content=step.output.text)]
        if step.output is not None
        else []
    )
    return Step(
        step_id=number,
        source="agent",
        message=text,
        tool_calls=[
            ToolCall(
                tool_call_id=call_id,
                function_name=step.tool or "unknown",
                # The call as the account shows it: its command, else its input as JSON text.
                arguments={"shown": step.call.text if step.call is not None else ""},
            )
        ],
        observation=Observation(results=results) if results else None,
        extra=extra,
    )


def split_at_answer(
    steps: Sequence[AccountStep], sequence: int
) -> tuple[list[AccountStep], list[AccountStep]]:
    """The account placed at policy call `sequence`, cut after the last tool call whose
    command names its response file (`resp-<n>.json`, read from the whole command):
    what the agent did up to its answer, and what it went on to do after it (shown after
    the evaluator's response step). Without such a call, all of it comes before."""
    for index in range(len(steps) - 1, -1, -1):
        step = steps[index]
        if step.kind == "tool" and sequence in step.answers:
            return list(steps[: index + 1]), list(steps[index + 1 :])
    return list(steps), []


class _Steps:
    """A trajectory's steps, numbered as they are added."""

    def __init__(self) -> None:
        self.steps: list[Step] = []
        self.account = 0

    @property
    def next_id(self) -> int:
        return len(self.steps) + 1

    def add(self, step: Step) -> None:
        self.steps.append(step)

    def add_account(self, steps: Sequence[AccountStep]) -> None:
        for step in steps:
            self.steps.append(_account_step(step, self.next_id))
            self.account += 1


class _CannotWrite(Exception):
    """The export's own folder cannot be written (not the attempt's fault)."""


@dataclass
class _Images:
    """The delivered images copied beside the trajectory."""

    folder: Path
    copied: int = 0

    def part(
        self, evidence: AttemptEvidence, observation: DeliveredObservation, camera: str
    ) -> ContentPart | None:
        data = delivered_image(evidence, observation, camera)
        if data is None:
            return None
        name = evidence.paths.observation_image(observation.sequence, camera).name
        try:
            (self.folder / IMAGES_DIR).mkdir(exist_ok=True)
            (self.folder / IMAGES_DIR / name).write_bytes(data)
        except OSError as exc:
            raise _CannotWrite(exc) from exc
        self.copied += 1
        return ContentPart(
            type="image", source=ImageSource(media_type="image/png", path=f"{IMAGES_DIR}/{name}")
        )


def _observation_step(
    number: int,
    evidence: AttemptEvidence,
    observation: DeliveredObservation,
    images: _Images,
) -> Step:
    path = evidence.paths.observation(observation.sequence)
    try:
        document, _ = _text(path.read_bytes())
    except OSError as exc:
        raise EvidenceError(f"{evidence.paths.relative(path)}: {exc.strerror or exc}") from exc
    parts = [ContentPart(type="text", text=document)]
    for camera in evidence.cameras:
        part = images.part(evidence, observation, camera)
        if part is not None:
            parts.append(part)
    return Step(
        step_id=number,
        timestamp=_at(observation.published_at),
        source="user",
        message=parts,
        extra=_mailroom(
            "observation",
            sequence=observation.sequence,
            controls_before=observation.control,
            file=evidence.paths.relative(path),
            images="delivered" if len(parts) > 1 else "not kept (a minimal record)",
        ),
    )


def _response_step(
    number: int,
    evidence: AttemptEvidence,
    decision: JudgedDecision,
    lines: Sequence[RequestLine],
    provider: str | None,
) -> Step:
    path = evidence.paths.response(decision.sequence)
    try:
        with path.open("rb") as handle:
            data = handle.read(MAX_RESPONSE_BYTES + 1)
    except FileNotFoundError:
        data = None
    except OSError as exc:
        raise EvidenceError(f"{evidence.paths.relative(path)}: {exc.strerror or exc}") from exc
    if data is None:
        message, not_utf8 = "", False
    else:
        message, not_utf8 = _text(data[:MAX_RESPONSE_BYTES])
    feedback = json.loads(decision.feedback) if decision.feedback is not None else None
    metrics = _metrics(lines, provider) if provider is not None else None
    return Step(
        step_id=number,
        timestamp=_at(decision.claimed_at),
        source="agent",
        model_name=_answering_model(lines),
        message=message,
        metrics=metrics,
        llm_call_count=sum(ln.outcome != "refused" for ln in lines)
        if provider is not None
        else None,
        extra=_mailroom(
            "response",
            sequence=decision.sequence,
            verdict=decision.verdict,
            rejected=decision.warning,
            feedback=feedback,
            latency_ms=decision.latency_ms,
            file=evidence.paths.relative(path) if data is not None else None,
            kept="no: the response file was not kept" if data is None else None,
            not_utf8=True if not_utf8 else None,
            cut_at_bytes=MAX_RESPONSE_BYTES
            if data is not None and len(data) > MAX_RESPONSE_BYTES
            else None,
        ),
    )


def _agent(manifest: dict[str, Any], result: EpisodeResult) -> Agent:
    profile = manifest.get("profile")
    profile = profile if isinstance(profile, dict) else {}
    declaration = profile.get("declaration")
    declaration = declaration if isinstance(declaration, dict) else {}
    declared = declaration.get("declared_models")
    declared = declared if isinstance(declared, list) else []
    declared_actor = next(
        (m.get("identity") for m in declared if isinstance(m, dict) and m.get("role") == "actor"),
        None,
    )
    usage = result.usage
    models = usage.models if isinstance(usage, ProviderUsage) else []
    answering = [{"model": m.model, "requests": m.requests} for m in models]
    most = max(models, key=lambda m: m.requests, default=None)
    model = most.model if most is not None else declared_actor
    return Agent(
        name=str(profile.get("name") or "unknown"),
        version=f"sha256:{profile.get('declaration_sha256') or 'unknown'}",
        model_name=str(model) if model is not None else None,
        extra={
            "mailroom": {
                "profile": profile.get("name"),
                "profile_declaration_sha256": profile.get("declaration_sha256"),
                "method_family": declaration.get("method_family"),
                "declared_models": declared,
                "answering_models": answering,
                "model_verified": usage.model_verified
                if isinstance(usage, ProviderUsage)
                else None,
                "model_name_is": "the model that answered most requests (gateway)"
                if most is not None
                else "the declared actor model, unverified",
            }
        },
    )


def _final_metrics(result: EpisodeResult, lines: Sequence[RequestLine], steps: int) -> FinalMetrics:
    usage = result.usage
    if not isinstance(usage, ProviderUsage):
        reason = unmetered_reason(result)
        return FinalMetrics(
            total_steps=steps,
            extra={"mailroom": {"metered": False, "why": reason}},
        )
    totals = _metrics(lines, usage.provider)
    return FinalMetrics(
        total_prompt_tokens=totals.prompt_tokens if totals else None,
        total_completion_tokens=totals.completion_tokens if totals else None,
        total_cached_tokens=totals.cached_tokens if totals else None,
        total_cost_usd=usage.cost,
        total_steps=steps,
        extra={
            "mailroom": {
                "metered": True,
                "provider": usage.provider,
                "provider_requests": usage.provider_requests,
                "refused_requests": usage.refused_requests,
                "failed_requests": usage.failed_requests,
                "input_tokens": usage.input_tokens,
                "output_tokens": usage.output_tokens,
                "cache_read_tokens": usage.cache_read_tokens,
                "cache_write_tokens": usage.cache_write_tokens,
                "cost_note": usage.cost_note,
                "provider_time_ms": usage.provider_time_ms,
                "requests_before_first_observation": sum(ln.decision == 0 for ln in lines),
            }
        },
    )


def _trajectory(
    identity: dict[str, Any],
    manifest: dict[str, Any],
    evidence: AttemptEvidence,
    *,
    superseded: bool,
    folder: Path,
) -> tuple[Trajectory, _Steps, _Images]:
    result = evidence.result
    paths = evidence.paths
    lines = _requests(paths, result)
    provider = result.usage.provider if isinstance(result.usage, ProviderUsage) else None
    by_decision: dict[int, list[RequestLine]] = {}
    for line in lines:
        by_decision.setdefault(line.decision, []).append(line)

    fmt = declared_trace(manifest)
    account = read_trace(paths.root, fmt) if fmt is not None else None
    sequences = [o.sequence for o in evidence.observations]
    placed = assign_account(account.steps, sequences) if account is not None else None

    steps = _Steps()
    images = _Images(folder)
    launch = _launch_message(paths)
    if launch is not None:
        text, version = launch
        steps.add(
            Step(
                step_id=steps.next_id,
                source="system",
                timestamp=_at(evidence.actor_started_at),
                message=text,
                extra=_mailroom("launch_message", instructions_version=version),
            )
        )
    if placed is not None:
        steps.add_account(placed.before)
    decisions = {d.sequence: d for d in evidence.decisions}
    for observation in evidence.observations:
        steps.add(_observation_step(steps.next_id, evidence, observation, images))
        at = placed.decisions.get(observation.sequence, []) if placed is not None else []
        decision = decisions.get(observation.sequence)
        if decision is None:
            steps.add_account(at)
            continue
        answering, afterwards = split_at_answer(at, observation.sequence)
        steps.add_account(answering)
        used = by_decision.get(observation.sequence, [])
        steps.add(_response_step(steps.next_id, evidence, decision, used, provider))
        steps.add_account(afterwards)
    if placed is not None:
        steps.add_account(placed.after)
    ended = f"The episode ended: {result.outcome}" + (
        f" ({result.termination})" if result.termination else ""
    )
    steps.add(
        Step(
            step_id=steps.next_id,
            timestamp=result.finished_at,
            source="system",
            message=ended,
            extra=_mailroom(
                "episode_end",
                outcome=result.outcome,
                termination=result.termination,
                truncation=result.truncation,
            ),
        )
    )
    extra = {
        "mailroom": {
            "format": ATIF_EXPORT_FORMAT,
            "run": identity,
            "attempt_id": result.attempt_id,
            "case_id": result.case_id,
            "superseded": superseded,
            "case": result.case.model_dump(mode="json"),
            "outcome": result.outcome,
            "termination": result.termination,
            "truncation": result.truncation,
            "counters": result.counters.model_dump(mode="json"),
            "blinded": result.blinded,
            "settings": result.settings.model_dump(mode="json"),
            "errors": [e.model_dump(mode="json") for e in result.errors],
            "started_at": result.started_at,
            "finished_at": result.finished_at,
            "agent_account": {
                "format": fmt,
                "read": account is not None and account.readable,
                "problems": account.problems if account is not None else [],
                "verified": False,
            }
            if fmt is not None
            else None,
            "placeholders": PLACEHOLDERS,
            "not_in_atif": list(NOT_IN_ATIF),
        }
    }
    # An attempt's id comes from the plan: two runs of one plan share them, so a
    # trajectory is named by its run as well (readers key transcripts on it).
    name = f"{identity['run_id']}:{result.attempt_id}"
    trajectory = Trajectory(
        session_id=name,
        trajectory_id=name,
        agent=_agent(manifest, result),
        steps=steps.steps,
        notes=(
            "Exported by mailroom from one attempt of a run. Steps marked "
            "extra.mailroom.kind 'agent_account' are the agent's own account of its work, "
            "as it printed it: not verified. Observations, responses, verdicts and metered "
            "usage are the evaluator's records."
        ),
        final_metrics=_final_metrics(result, lines, len(steps.steps)),
        extra=extra,
    )
    return trajectory, steps, images


def _ours(out: Path) -> bool:
    try:
        index = json.loads((out / INDEX_FILE).read_text("utf-8"))
        written = index.get("format")
        return isinstance(written, str) and written in ATIF_EXPORT_FORMATS
    except (OSError, ValueError, AttributeError):
        return False


def export_atif(
    run_dir: Path, out_dir: Path | None = None, attempt_ids: Sequence[str] = ()
) -> AtifExportSummary:
    """Write one ATIF trajectory per attempt of `run_dir` (or of `attempt_ids`) into
    `out_dir` (default `run_dir/export/atif`); raises ExportError when the run cannot be
    read at all, an attempt is unknown or `out_dir` holds something else."""
    run = RunDirectory(run_dir)
    loaded = load_run(run)
    manifest = loaded.manifest
    keeps_images = manifest.get("record") == "full"
    cameras = tuple(str(c) for c in manifest["protocol"]["cameras"])
    records: list[AttemptRecord] = selected_attempts(run, attempt_ids)
    identity = run_identity(run, manifest)
    latest: dict[str, int] = {}
    for record in run.attempts():
        latest[record.case_id] = max(latest.get(record.case_id, 0), record.attempt)
    out = (
        out_dir if out_dir is not None else run_dir / DEFAULT_EXPORT_DIR / DEFAULT_ATIF_DIR
    ).absolute()
    if not out.name:
        raise ExportError(f"{out} is no folder to write trajectories into: name another --out")
    temporary = out.with_name(f".{out.name}.{secrets.token_hex(4)}.tmp")
    try:
        out.parent.mkdir(parents=True, exist_ok=True)
        temporary.mkdir()
    except OSError as exc:
        raise ExportError(f"cannot write beside {out}: {exc.strerror or exc}") from exc
    exported: list[ExportedTrajectory] = []
    skipped: list[Skipped] = []
    try:
        for record in records:
            where = f"episodes/{record.attempt_id}"
            folder = temporary / record.attempt_id
            folder.mkdir()
            try:
                evidence = read_evidence(record, cameras, keeps_images, loaded.action)
                trajectory, steps, images = _trajectory(
                    identity,
                    manifest,
                    evidence,
                    superseded=record.attempt != latest[record.case_id],
                    folder=folder,
                )
            except EvidenceError as exc:
                shutil.rmtree(folder)
                skipped.append(Skipped(where, str(exc)))
                continue
            except OSError as exc:  # its evidence cannot be read (not the export's folder)
                shutil.rmtree(folder)
                skipped.append(Skipped(where, f"unreadable: {exc.strerror or exc}"))
                continue
            document = _without_paths(trajectory.document(), _machine_paths(run, evidence.paths))
            (folder / TRAJECTORY_FILE).write_text(
                json.dumps(document, indent=2, ensure_ascii=False) + "\n", "utf-8"
            )
            exported.append(
                ExportedTrajectory(
                    attempt_id=record.attempt_id,
                    file=f"{record.attempt_id}/{TRAJECTORY_FILE}",
                    steps=len(steps.steps),
                    decisions=len(evidence.decisions),
                    account_steps=steps.account,
                    images=images.copied,
                )
            )
        index = {
            "format": ATIF_EXPORT_FORMAT,
            "atif_version": ATIF_VERSION,
            "run": identity,
            "trajectories": [
                {"attempt_id": t.attempt_id, "file": t.file, "steps": t.steps} for t in exported
            ],
            "skipped": [{"file": s.file, "reason": s.reason} for s in skipped],
        }
        index = _without_paths(index, _machine_paths(run, None))
        (temporary / INDEX_FILE).write_text(
            json.dumps(index, indent=2, ensure_ascii=False) + "\n", "utf-8"
        )
    except (OSError, _CannotWrite) as exc:
        shutil.rmtree(temporary, ignore_errors=True)
        raise ExportError(f"cannot write the trajectories beside {out}: {exc}") from exc
    except BaseException:
        shutil.rmtree(temporary, ignore_errors=True)
        raise
    publish_folder(temporary, out, _ours, "trajectory export")
    return AtifExportSummary(out_dir=out, trajectories=exported, skipped=skipped)
