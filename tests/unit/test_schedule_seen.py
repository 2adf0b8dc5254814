"""Resume never re-runs an attempt whose first observation may have been shown, even
one killed during that first publication (real run directories, no simulator)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from mailroom.orchestrator.campaign.coordinator import schedule
from mailroom.orchestrator.catalog.cases import Case
from mailroom.orchestrator.records.run_directory import RunDirectory


def _logged(*events: str) -> bytes:
    return b"".join(json.dumps({"t": 0.0, "event": e}).encode() + b"\n" for e in events)


@pytest.mark.parametrize(
    ("log", "seen"),
    [
        (_logged(), False),
        (_logged("actor_launched"), False),
        (_logged("first_observation_publishing"), True),  # killed mid-publication
        (_logged("first_observation_publishing", "observation_published"), True),
        (_logged("observation_published"), True),  # logs written before the marker
    ],
)
def test_an_attempt_cut_short_is_interrupted_once_its_first_publication_began(
    tmp_path: Path, log: bytes, seen: bool
) -> None:
    case = Case(suite="libero_10", task_index=0, init_state_index=0, seed=7)
    run = RunDirectory(tmp_path / "run")
    directory = run.episode_dir(case.attempt_id(1))
    directory.mkdir(parents=True)
    (directory / "events.jsonl").write_bytes(log)
    plan = schedule([case], run)
    assert [r.attempt_id for r in plan.interrupted] == ([case.attempt_id(1)] if seen else [])
    assert [r.attempt_id for r in plan.restarted] == ([] if seen else [case.attempt_id(1)])
    assert [(w.case.case_id, w.attempt) for w in plan.work] == ([] if seen else [(case.case_id, 2)])
