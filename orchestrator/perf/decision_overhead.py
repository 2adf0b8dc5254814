"""The orchestrator's own cost per decision, without the simulator.

Everything here is the real code path on real files in a temporary directory (on the
same disk as a run directory would be): a real endpoint, `MailboxTransport`, the
frozen parser, evidence, and in `cycle` the real `EpisodeRunner`. Only the simulator
is replaced: the fake simulator (`sim/fake.py`) returns synthetic 256 x 256 uint8
frames (copied through the protocol transform as the real adapter does) and never
steps physics or renders. The actor answers inline, between publication and the wait,
so no thread or process competes with the measured path and nothing is detected late.

- `transport`: `MailboxTransport.deliver` and `await_decision` alone, phase by phase.
- `cycle`: whole episodes through `EpisodeRunner`: the overhead per decision from the
  response in the inbox to the next observation published (the benchmark's
  `overhead_ms` with physics and rendering at zero). Phases are per decision;
  `after_publication` (events, kept copies, step rows) runs while the actor works and
  is not part of the overhead.

Run by hand, never as a timed test:

    .venv/bin/python -m mailroom.orchestrator.perf.decision_overhead [--decisions 300] \
        [--outbox-durability atomic|durable] [--json]
"""

from __future__ import annotations

import argparse
import json
import secrets
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt
from mailroom.mailbox.endpoint import Endpoint, create_endpoint
from mailroom.mailbox.messages import ActionSpec, PublicCounters
from mailroom.mailbox.parser import Accepted, ActionLimits
from mailroom.mailbox.publish import OutboxDurability
from mailroom.measures import CLOCK
from mailroom.orchestrator.actors.profiles import DEFAULT_INSTRUCTIONS
from mailroom.orchestrator.episode.evidence import EpisodeEvidence
from mailroom.orchestrator.episode.runner import EpisodeRequest, EpisodeRunner
from mailroom.orchestrator.episode.settings import RunSettings
from mailroom.orchestrator.families.registry import DEFAULT_BENCHMARK, family
from mailroom.orchestrator.perf.detection import act_response, milliseconds, write_response
from mailroom.orchestrator.records.confinement import ConfinementRecord
from mailroom.orchestrator.records.layout import RunPaths
from mailroom.orchestrator.sim.base import Capture
from mailroom.orchestrator.sim.fake import FAKE_IDENTITY, FakeSimulator
from mailroom.orchestrator.transport.base import Arrival, DecisionOutcome, Delivery
from mailroom.orchestrator.transport.mailbox import MailboxTransport

K = 5
LIMITS = ActionLimits(max_chunk=K)
Image = npt.NDArray[np.uint8]


def synthetic_frame(seed: int, size: int = 256) -> Image:
    """A frame that encodes to about the size of a rendered LIBERO frame (~100 kB)."""
    rng = np.random.default_rng(seed)
    y, x = np.mgrid[0:size, 0:size]
    base = np.stack([(x * 0.7 + y * 0.2), (y * 0.6 + 40), (x * 0.3 + y * 0.3 + 80)], axis=-1)
    for _ in range(12):
        y0, x0 = rng.integers(0, size - 40, 2)
        h, w = rng.integers(10, 60, 2)
        base[y0 : y0 + h, x0 : x0 + w] = rng.integers(0, 255, 3)
    noisy = base + rng.normal(0.0, 3.0, base.shape)
    frame: Image = np.clip(noisy, 0, 255).astype(np.uint8)
    return frame


# The fake's episodes stand for the default family's (`FAKE_IDENTITY`): its shapes.
MEASURED = family(DEFAULT_BENCHMARK)
RAW = {camera: synthetic_frame(i) for i, camera in enumerate(MEASURED.observation_spec.cameras)}


def _capture() -> Capture:
    # What the real adapter hands over: a fresh, transformed, contiguous copy.
    with CLOCK.phase("capture"):
        images = {c: np.ascontiguousarray(img[::-1, ::-1]) for c, img in RAW.items()}
    return Capture(images=images, joint_pos=None, gripper_qpos=None)


def _answer(endpoint: Endpoint, delivery: Delivery) -> None:
    """The actor's side: an atomic write of the response (temporary name, rename)."""
    write_response(endpoint.response_file(delivery.sequence), act_response(delivery.request_id, K))


SPEC = ActionSpec(
    layout=list(MEASURED.action_spec.layout),
    control_hz=MEASURED.action_spec.control_hz,
    replan_interval=K,
    max_chunk=K,
)


def _delivery(sequence: int, capture: Capture) -> Delivery:
    return Delivery(
        sequence=sequence,
        request_id=secrets.token_hex(16),
        instruction="put both the cream cheese box and the butter in the basket",
        capture=capture,
        action_spec=SPEC,
        counters=PublicCounters(
            policy_calls=sequence - 1,
            max_policy_calls=10_000,
            executed_controls=(sequence - 1) * K,
            max_controls=50_000,
            rejected_responses=0,
        ),
        feedback=None,
    )


def measure_transport(
    decisions: int, workdir: Path, keep_images: bool, durability: OutboxDurability
) -> dict[str, Any]:
    """`deliver` then `await_decision` on an answer already in the inbox, `decisions` times."""
    endpoint = create_endpoint(workdir / "mailbox")
    evidence = EpisodeEvidence(RunPaths(workdir / "private").attempt("a-1").root)
    transport = MailboxTransport(
        endpoint, evidence, keep_images=keep_images, outbox_durability=durability
    )
    deliver: list[float] = []
    await_: list[float] = []
    CLOCK.reset(enabled=True)
    try:
        for sequence in range(1, decisions + 1):
            delivery = _delivery(sequence, _capture())
            started = time.perf_counter()
            transport.deliver(delivery)
            deliver.append(time.perf_counter() - started)
            _answer(endpoint, delivery)
            started = time.perf_counter()
            outcome = transport.await_decision(delivery, LIMITS, 5.0)
            await_.append(time.perf_counter() - started)
            if not isinstance(outcome, Accepted):
                raise RuntimeError(f"response {sequence} was not accepted: {outcome!r}")
        transport.close(decisions)
    finally:
        samples = dict(CLOCK.samples)
        CLOCK.reset(enabled=False)
        evidence.close()
        endpoint.held.close()
    phases: dict[str, dict[str, float | None]] = {
        name: milliseconds(samples[name])
        for name in ("capture", "encode", "observation_document", "publish", "after_publication")
        if name in samples
    }
    phases["deliver_total"] = milliseconds(deliver)
    phases["claim_parse_validate"] = milliseconds(samples["claim_parse"])
    phases["await_decision_total"] = milliseconds(await_)
    return {
        "keep_images": keep_images,
        "outbox_durability": durability,
        "decisions": decisions,
        "phases": phases,
    }


class InlineActor:
    """`MailboxTransport` with the actor's answer written before each wait (untimed)."""

    def __init__(self, inner: MailboxTransport) -> None:
        self.inner = inner
        self.waits: list[float] = []

    def deliver(self, delivery: Delivery) -> None:
        self.inner.deliver(delivery)

    def await_decision(
        self, delivery: Delivery, limits: ActionLimits, timeout_s: float
    ) -> DecisionOutcome:
        _answer(self.inner.endpoint, delivery)
        started = time.perf_counter()
        outcome = self.inner.await_decision(delivery, limits, timeout_s)
        self.waits.append(time.perf_counter() - started)
        return outcome

    def arrival(self) -> Arrival:
        return self.inner.arrival()

    def close(self, last_sequence: int) -> None:
        self.inner.close(last_sequence)


def measure_cycle(
    decisions: int, workdir: Path, keep_images: bool, durability: OutboxDurability
) -> dict[str, Any]:
    """Whole episodes through the real runner; phases and overhead per decision."""
    settings = RunSettings(
        max_policy_calls=decisions,
        replan_interval=K,
        response_timeout_s=5,
        outbox_durability=durability,
    )
    adapter = FakeSimulator(control_cap=decisions * K, frames=_capture)
    runner = EpisodeRunner(adapter, settings)
    endpoint = create_endpoint(workdir / "mailbox")
    evidence = EpisodeEvidence(RunPaths(workdir / "private").attempt("a-1").root)
    mailbox = MailboxTransport(
        endpoint, evidence, keep_images=keep_images, outbox_durability=settings.outbox_durability
    )
    actor = InlineActor(mailbox)
    request = EpisodeRequest(
        attempt_id="a-1",
        case_id="c",
        identity=FAKE_IDENTITY,
        init_state_index=0,
        seed=0,
        reference_horizon=decisions * K,
        confinement=ConfinementRecord(mode="none", network="host"),  # an in-process actor
        instructions_version=DEFAULT_INSTRUCTIONS,  # it reads none: the default's is recorded
    )
    CLOCK.reset(enabled=True)
    try:
        result = runner.run(request, actor, evidence)
    finally:
        cycles = CLOCK.cycles
        samples = dict(CLOCK.samples)
        CLOCK.reset(enabled=False)
        evidence.close()
        endpoint.held.close()
    if result.counters.action_decisions != decisions:
        raise RuntimeError(f"the episode ended early: {result.model_dump()}")
    # A cycle runs from the returned decision to the published observation; the wait
    # before it (on an answer already there) is the claim, parse and validation.
    waits = actor.waits[: len(cycles)]
    overhead = [c["cycle"] + wait for c, wait in zip(cycles, waits, strict=True)]
    phases: dict[str, dict[str, float | None]] = {
        name: milliseconds([c.get(name, 0.0) for c in cycles])
        for name in ("capture", "encode", "observation_document", "publish", "after_publication")
    }
    phases["claim_parse_validate"] = milliseconds(samples["claim_parse"])
    phases["await_decision_total"] = milliseconds(actor.waits)
    phases["cycle"] = milliseconds([c["cycle"] for c in cycles])
    return {
        "keep_images": keep_images,
        "outbox_durability": durability,
        "decisions": len(cycles),
        "phases": phases,
        "overhead": milliseconds(overhead),
    }


def _table(title: str, figures: dict[str, Any]) -> None:
    print(
        f"{title} ({figures['decisions']} decisions, keep_images={figures['keep_images']}, "
        f"outbox {figures['outbox_durability']})"
    )
    print(f"  {'phase':<24} {'p50 ms':>8} {'p95 ms':>8}")
    rows = dict(figures["phases"])
    if "overhead" in figures:
        rows["overhead"] = figures["overhead"]
    for name, values in rows.items():
        print(f"  {name:<24} {values['p50_ms']:>8.3f} {values['p95_ms']:>8.3f}")


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description="Orchestrator overhead per decision, no sim.")
    parser.add_argument("--decisions", type=int, default=300, help="decisions per measurement")
    parser.add_argument(
        "--outbox-durability",
        choices=["atomic", "durable"],
        default="atomic",
        help="the run setting under test (default: the setting's default)",
    )
    parser.add_argument("--json", action="store_true", help="print the figures as JSON")
    args = parser.parse_args(argv)
    durability: OutboxDurability = "durable" if args.outbox_durability == "durable" else "atomic"
    results: dict[str, Any] = {}
    for keep in (False, True):
        label = "full" if keep else "minimal"
        with tempfile.TemporaryDirectory(prefix="mailroom-overhead-") as tmp:
            results[f"transport_{label}"] = measure_transport(
                args.decisions, Path(tmp), keep, durability
            )
        with tempfile.TemporaryDirectory(prefix="mailroom-overhead-") as tmp:
            results[f"cycle_{label}"] = measure_cycle(args.decisions, Path(tmp), keep, durability)
    if args.json:
        print(json.dumps(results, indent=2))
        return 0
    for name, figures in results.items():
        _table(name, figures)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
