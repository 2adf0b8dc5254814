"""Run directories and their endpoints, written the way the orchestrator writes them,
for the blinding audit (no simulator): a manifest and plan, per attempt the private
evidence (endpoint.json, launch_message.json, events, result) and a real opaque endpoint
with published observations, PNG frames, the actor's responses and scratch.

`RunBuilder(base, plan)` makes the run; `.attempt(case)` each attempt, a `BuiltAttempt`
that can plant what a faulty orchestrator or a curious actor would leave.
"""

from __future__ import annotations

import json
import os
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from mailroom.benchmarks.libero.catalog import load_catalog
from mailroom.benchmarks.libero.specs import LIBERO_ACTION, LIBERO_OBSERVATION
from mailroom.mailbox.endpoint import Endpoint, create_endpoint
from mailroom.mailbox.messages import ActionSpec, Closed, PublicCounters, to_document
from mailroom.mailbox.publish import document_bytes, publish_bytes
from mailroom.orchestrator.actors.confinement import ConfinementSettings
from mailroom.orchestrator.actors.instructions import render_instructions
from mailroom.orchestrator.actors.process import render_command
from mailroom.orchestrator.actors.profiles import profile_dir
from mailroom.orchestrator.campaign.manifest import build_manifest
from mailroom.orchestrator.catalog.cases import Case
from mailroom.orchestrator.catalog.plans import Plan, render_plan
from mailroom.orchestrator.episode.evidence import EpisodeEvidence
from mailroom.orchestrator.episode.runner import settings_record
from mailroom.orchestrator.episode.settings import RunSettings
from mailroom.orchestrator.records.confinement import ConfinementRecord
from mailroom.orchestrator.records.result import (
    CaseRecord,
    Counters,
    Enforcement,
    EpisodeResult,
    Latency,
    Outcome,
    TypedError,
    Usage,
)
from mailroom.orchestrator.records.run_directory import RunDirectory
from mailroom.orchestrator.sim.base import Capture
from mailroom.orchestrator.transport.base import Delivery
from mailroom.orchestrator.transport.observation import build_observation
from mailroom.orchestrator.transport.png import encode_png

ACTION_LAYOUT = LIBERO_ACTION.layout
CAMERAS = LIBERO_OBSERVATION.cameras
CONTROL_HZ = LIBERO_ACTION.control_hz

PROFILE = "scripted_diagnostic"
ACTOR = ["{python}", "/opt/actors/actor.py", "{endpoint}"]
SETTINGS = RunSettings(max_policy_calls=4, replan_interval=5, response_timeout_s=60.0)
ACTION = [0.0, 0.0, 0.7, 0.0, 0.0, 0.0, -1.0]
# Numbers that contain a short seed (7) or an initial-state index without naming one.
PROPRIO = ((0.7, 7.0, -0.07, 1.7e-07, 0.0, 0.0, 0.07), (0.04, -0.007))
FRAME = encode_png(np.zeros((256, 256, 3), dtype=np.uint8))
NOTES = "frames 1-2 read; chunk of 5 actions of 7 numbers; gripper open at 0.7\n"


@dataclass(frozen=True)
class BuiltAttempt:
    attempt_id: str
    case: Case
    directory: Path
    endpoint: Endpoint

    def observation(self, sequence: int) -> dict[str, Any]:
        document: dict[str, Any] = json.loads(self.endpoint.observation_file(sequence).read_text())
        return document

    def plant_observation(self, sequence: int, extra: dict[str, Any]) -> None:
        """Publish observation `sequence` again with `extra` fields, as a faulty
        orchestrator would."""
        document = {**self.observation(sequence), **extra}
        publish_bytes(self.endpoint.observation_file(sequence), document_bytes(document))

    def write(self, relative: str, data: str | bytes) -> Path:
        """A file under the endpoint, as the actor (scratch/, inbox/) would write it."""
        path = self.endpoint.root / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data.encode() if isinstance(data, str) else data)
        return path

    def instructions(self) -> str:
        text: str = json.loads((self.directory / "launch_message.json").read_text())["instructions"]
        return text

    def replace_events(self, *events: dict[str, Any]) -> None:
        lines = [json.dumps({"t": time.time(), **e}, sort_keys=True) for e in events]
        (self.directory / "events.jsonl").write_text("\n".join(lines) + "\n")


class RunBuilder:
    """A run directory and its endpoints, written the way the orchestrator writes them."""

    def __init__(
        self,
        base: Path,
        plan: Plan,
        *,
        run_id: str = "campaign-q3-alpha",
        dir_name: str = "vault-run-dir",
        mailbox_name: str = "mb",
    ) -> None:
        self.run_dir = base / dir_name
        self.mailbox_root = base / mailbox_name
        self.run_id = run_id
        self.plan = plan
        self.run = RunDirectory(self.run_dir)
        declaration = json.loads((profile_dir(PROFILE) / "profile.json").read_text())
        self.manifest = build_manifest(
            run_id=run_id,
            plan_sha256=plan.plan_sha256,
            plan_kind=plan.kind,
            n_cases=len(plan.cases),
            profile_name=PROFILE,
            profile_declaration=declaration,
            settings=SETTINGS,
            actor_command=ACTOR,
            record="full",
            run_dir=self.run_dir,
            mailbox_root=self.mailbox_root,
            workers=1,
            confinement=ConfinementSettings(mode="none"),
        )
        self.run.write_manifest(self.manifest)
        self.run.plan_path.write_bytes(render_plan(plan))
        self.run.event("launched", volatile=self.manifest["volatile"])

    @property
    def cases(self) -> list[Case]:
        return self.plan.to_cases()

    def attempt(
        self,
        case: Case,
        *,
        attempt: int = 1,
        observations: int = 2,
        spawned: bool = True,
        outcome: Outcome = "failure",
    ) -> BuiltAttempt:
        attempt_id = case.attempt_id(attempt)
        evidence = EpisodeEvidence(self.run.episode_dir(attempt_id))
        endpoint = create_endpoint(self.mailbox_root)
        instructions = render_instructions(str(endpoint.root))
        evidence.write_private(
            "endpoint.json",
            {"endpoint": str(endpoint.root), "token": endpoint.token, "case": case.model_dump()},
        )
        evidence.write_private("launch_message.json", {"instructions": instructions})
        if spawned:
            argv = render_command(ACTOR, endpoint=str(endpoint.root), python=sys.executable)
            evidence.event("actor_started", detail=f"ActorProcess(pid=4242, argv={argv!r})")
        instruction = load_catalog().entry(case.suite, case.task_index).instruction
        built = BuiltAttempt(attempt_id, case, evidence.directory, endpoint)
        for sequence in range(1, observations + 1):
            self._exchange(built, evidence, instruction, sequence)
        built.write("scratch/notes.txt", NOTES)
        closed = to_document(Closed(last_sequence=observations))
        publish_bytes(endpoint.closed_file, document_bytes(closed))
        evidence.event("closed_published", last_sequence=observations)
        if spawned:
            evidence.event("actor_stopped", exit_status=0)
        evidence.close()
        evidence.write_result(self._result(case, attempt_id, observations, outcome))
        return built

    def _exchange(
        self, built: BuiltAttempt, evidence: EpisodeEvidence, instruction: str, sequence: int
    ) -> None:
        endpoint = built.endpoint
        images = {c: np.zeros((256, 256, 3), dtype=np.uint8) for c in CAMERAS}
        delivery = Delivery(
            sequence=sequence,
            request_id=os.urandom(16).hex(),
            instruction=instruction,
            capture=Capture(images=images, joint_pos=PROPRIO[0], gripper_qpos=PROPRIO[1]),
            action_spec=ActionSpec(
                layout=list(ACTION_LAYOUT), control_hz=CONTROL_HZ, replan_interval=5, max_chunk=5
            ),
            counters=PublicCounters(
                policy_calls=sequence - 1,
                max_policy_calls=4,
                executed_controls=5 * (sequence - 1),
                max_controls=20,
                rejected_responses=0,
            ),
            feedback=None,
        )
        for camera in CAMERAS:
            publish_bytes(endpoint.image_file(sequence, camera), FRAME)
        document = to_document(build_observation(delivery, endpoint))
        publish_bytes(endpoint.observation_file(sequence), document_bytes(document))
        evidence.event("observation_published", sequence=sequence)
        response = {
            "schema": "mailroom.response/v1",
            "request_id": delivery.request_id,
            "decision": "act",
            "actions": [ACTION] * 5,
        }
        built.write(f"inbox/resp-{sequence}.json", json.dumps(response))

    def _result(self, case: Case, attempt_id: str, calls: int, outcome: Outcome) -> EpisodeResult:
        entry = load_catalog().entry(case.suite, case.task_index)
        errors = (
            [TypedError(kind="policy_error", code="actor_exited", message="gone", policy_call=1)]
            if outcome == "error"
            else []
        )
        return EpisodeResult(
            attempt_id=attempt_id,
            case_id=case.case_id,
            outcome=outcome,
            termination="policy_error" if outcome == "error" else None,
            truncated=outcome == "failure",
            truncation="policy_call_cap" if outcome == "failure" else None,
            counters=Counters(policy_calls=calls, action_decisions=calls, settling_controls=10),
            latency=Latency(samples=calls, median_ms=5.0, max_ms=9.0, total_ms=10.0),
            queue_delay=Latency.of([0.5]),
            processing=Latency.of([]),
            usage=Usage(),
            errors=errors,
            case=CaseRecord(
                benchmark=entry.benchmark,
                suite=case.suite,
                task_index=case.task_index,
                task_name=entry.task_name,
                instruction=entry.instruction,
                init_state_index=case.init_state_index,
                task_order_index=case.task_order_index,
                seed=case.seed,
                bddl_sha256=entry.bddl_sha256,
                init_states_sha256=entry.init_states_sha256,
                state_sha256="0" * 64,
            ),
            settings=settings_record(
                SETTINGS, SETTINGS.control_cap(520), LIBERO_OBSERVATION.settling_controls
            ),
            blinded=True,
            confinement=ConfinementRecord(mode="none", network="host"),
            instructions_version="v1",
            simulator="dedicated",
            enforcement=Enforcement(memory="enforced", writable_space="sampled"),
            started_at="2000-01-01T00:00:00.000Z",
            finished_at="2000-01-01T00:00:01.000Z",
            wall_time_s=1.0,
        )
