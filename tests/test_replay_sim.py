"""`mailroom replay` on the real simulator: a recorded run reproduces; one number
changed in a recorded action diverges, named with its control; a missing event log is
not replayable; another simulator stack is said to be drift."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
from conftest import cli_plan, launch_command, mailroom_exe
from mailroom.orchestrator.actors.profiles import profile_dir

pytestmark = pytest.mark.sim

ACTOR = str(profile_dir("scripted_diagnostic") / "actor.py")
FIRST = "libero_10-t000-i00-o0-s20260907-a1"


@pytest.fixture(scope="module")
def recorded(tmp_path_factory: pytest.TempPathFactory, module_mailbox_root: Path) -> Path:
    """Two episodes (three chunks, then stop), recorded minimally: no images, no video."""
    base = tmp_path_factory.mktemp("replay")
    plan = cli_plan(base / "plan.json", "fast", "--task-ids", "0,1")
    run_dir = base / "run"
    done = subprocess.run(
        [
            *launch_command(
                plan, run_dir, module_mailbox_root / "replay", f"python3 {ACTOR} {{endpoint}}"
            ),
            *("--record", "minimal", "--workers", "2", "--json"),
        ],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert not list(run_dir.glob("episodes/*/observations/*.png"))  # minimal indeed
    return run_dir


def _replay(run_dir: Path, *options: str) -> tuple[int, dict[str, Any], str]:
    done = subprocess.run(
        [mailroom_exe(), "replay", str(run_dir), "--json", *options],
        capture_output=True,
        text=True,
        timeout=600,
    )
    report: dict[str, Any] = json.loads(done.stdout) if done.stdout else {}
    return done.returncode, report, done.stderr


def _copy(run_dir: Path, tmp_path: Path) -> Path:
    copy = tmp_path / "copy"
    shutil.copytree(run_dir, copy)
    return copy


def test_a_recorded_run_is_reproduced(recorded: Path) -> None:
    code, report, err = _replay(recorded, "--workers", "2")
    assert code == 0, err
    verdicts = {v["attempt_id"]: v for v in report["verdicts"]}
    assert len(verdicts) == 2 and all(v["verdict"] == "reproduced" for v in verdicts.values())
    result = json.loads((recorded / "episodes" / FIRST / "result.json").read_text())
    assert verdicts[FIRST]["executed_controls"] == result["counters"]["executed_controls"] == 15
    assert verdicts[FIRST]["checked_observations"] == 4  # three chunks, then the stop
    assert report["drift"] == {}
    # The goal predicates were evaluated on the way, and kept apart from the result.
    assert all(v["diagnostics"] == "written" for v in verdicts.values())
    diagnostics = json.loads((recorded / "episodes" / FIRST / "diagnostics.json").read_text())
    assert diagnostics["controls_evaluated"] == 15
    assert [p["predicate"] for p in diagnostics["predicates"]] == [
        "in alphabet_soup_1 basket_1_contain_region",
        "in tomato_sauce_1 basket_1_contain_region",
    ]
    assert not any(p["held_at_end"] for p in diagnostics["predicates"])  # a failure


def test_one_number_changed_in_an_action_diverges_by_the_next_observation(
    recorded: Path, tmp_path: Path
) -> None:
    copy = _copy(recorded, tmp_path)
    log = copy / "episodes" / FIRST / "events.jsonl"
    lines = log.read_text().splitlines()
    for i, line in enumerate(lines):
        event = json.loads(line)
        if event["event"] == "actions_executed" and event["sequence"] == 2:
            event["executed_prefix"][1][2] = 0.9  # the second chunk's second control: 7
            lines[i] = json.dumps(event, sort_keys=True)
    log.write_text("\n".join(lines) + "\n")
    # ... on a stack the run did not record: said before the replay, and as drift.
    manifest = json.loads((copy / "manifest.json").read_text())
    manifest["environment"]["packages"]["mujoco"] = "3.2.2"
    (copy / "manifest.json").write_text(json.dumps(manifest))
    code, report, err = _replay(copy, "--case", FIRST.rsplit("-a", 1)[0])
    assert code == 1
    (verdict,) = report["verdicts"]
    assert verdict["verdict"] == "diverged"
    # Shown at the next observation (after control 10); the record agreed until the
    # observation after control 5: the change lies in controls 6 to 10.
    assert (verdict["control"], verdict["observation"]) == (10, 3)
    assert verdict["agreed_until_control"] == 5
    assert verdict["field"].startswith("image_sha256.")
    assert report["drift"] == {"mujoco": ["3.2.2", "3.2.3"]}
    said = " ".join(err.split())
    assert "version drift: mujoco recorded 3.2.2, installed 3.2.3" in said
    human = subprocess.run(
        [mailroom_exe(), "replay", str(copy), "--case", FIRST], capture_output=True, text=True
    )
    assert human.returncode == 1
    said = " ".join(human.stderr.split())
    assert "diverged at control 10 (observation 3; agreed until control 5)" in said
    assert "drift between versions, not evidence of tampering" in " ".join(human.stderr.split())


def test_an_attempt_without_its_event_log_is_not_replayable(recorded: Path, tmp_path: Path) -> None:
    copy = _copy(recorded, tmp_path)
    (copy / "episodes" / FIRST / "events.jsonl").unlink()
    code, report, _ = _replay(copy, "--case", FIRST)
    assert code == 1
    (verdict,) = report["verdicts"]
    assert verdict["verdict"] == "not_replayable" and "events.jsonl" in verdict["reason"]
