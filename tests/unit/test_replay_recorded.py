"""What a replay needs of an attempt, without a simulator: each kind of missing or
damaged evidence is `not_replayable` with its reason, and version drift is named."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from mailroom.orchestrator.campaign.manifest import package_version
from mailroom.orchestrator.replay.campaign import replay_run
from mailroom.orchestrator.replay.drift import version_drift
from mailroom.orchestrator.replay.recorded import NotReplayableError, read_recorded
from recorded_runs import make_run, write_result


def _event(kind: str, **fields: object) -> str:
    return json.dumps({"t": 1.0, "event": kind, **fields}) + "\n"


def _attempt(tmp_path: Path, events: str, *, executed: int = 5) -> Path:
    run, cases = make_run(tmp_path, proprio=False, run_id="run-replay")
    write_result(run, cases[0], 1, outcome="failure", executed=executed, proprio=False)
    directory = run.episode_dir(cases[0].attempt_id(1))
    (directory / "events.jsonl").write_text(events)
    return directory


WHOLE = (
    _event("observation_published", sequence=1, image_sha256={"agentview": "a" * 64})
    + _event("actions_executed", sequence=1, executed_prefix=[[0.0] * 7] * 5)
    + _event("observation_published", sequence=2, image_sha256={"agentview": "b" * 64})
)


def test_a_whole_record_is_read(tmp_path: Path) -> None:
    recorded = read_recorded(_attempt(tmp_path, WHOLE))
    assert sorted(recorded.observations) == [1, 2]
    assert [len(d.executed_prefix) for d in recorded.decisions] == [5]


@pytest.mark.parametrize(
    ("events", "executed", "reason"),
    [
        (WHOLE + "{torn\n", 5, "line 4 is not JSON"),
        (WHOLE, 10, "holds 5 executed controls, the result 10"),
        (
            WHOLE.replace("[0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0]", "[0.0, 0.0]", 1),
            5,
            "not a list of 7-vectors",
        ),
        (_event("episode_started", settling_controls=10), 0, "no observation was published"),
        (_event("observation_published", sequence=1, image_sha256={}), 0, "no image hashes"),
    ],
)
def test_damaged_evidence_is_not_replayable(
    tmp_path: Path, events: str, executed: int, reason: str
) -> None:
    with pytest.raises(NotReplayableError, match=reason):
        read_recorded(_attempt(tmp_path, events, executed=executed))


def test_missing_and_corrupt_results_are_not_replayable_and_reported_so(tmp_path: Path) -> None:
    directory = _attempt(tmp_path, WHOLE)
    (directory / "result.json").write_text("{}")
    with pytest.raises(NotReplayableError, match="cannot be trusted"):
        read_recorded(directory)
    (directory / "result.json").unlink()
    report = replay_run(directory.parent.parent)
    (verdict,) = report.verdicts
    assert verdict.verdict == "not_replayable" and "never finished" in (verdict.reason or "")
    assert not report.all_reproduced


def test_version_drift_names_each_package_that_differs() -> None:
    manifest = {"environment": {"packages": {"mujoco": "3.1.0", "robosuite": "1.4.0"}}}
    drift = version_drift(manifest)
    assert drift["mujoco"] == ["3.1.0", package_version("mujoco")]
    assert "robosuite" not in drift  # the same version
    assert drift["numpy"] == [None, package_version("numpy")]  # not recorded: unknown
