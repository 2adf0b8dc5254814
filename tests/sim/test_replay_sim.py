"""`mailroom replay` on the real simulator: a recorded run reproduces; one number
changed in a recorded action diverges, named with its control; a record whose success
control, native outcome or control counters were edited diverges at the episode's end,
naming that field; a missing event log is not replayable; another simulator stack is
said to be drift."""

from __future__ import annotations

import json
import shutil
import subprocess
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any

import pytest
from conftest import cli_plan, launch_command, mailroom_exe
from mailroom.orchestrator.actors.profiles import profile_dir
from recorded_events import attempt_events

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


Edit = Callable[[Path], None]


def _edit_result(attempt: Path, edit: Callable[[dict[str, Any]], None]) -> None:
    path = attempt / "result.json"
    result = json.loads(path.read_text())
    edit(result)
    path.write_text(json.dumps(result))


def _forged_success(attempt: Path) -> None:
    """A failed attempt's record claims a first success at control 7 (policy call 2)."""

    def edit(result: dict[str, Any]) -> None:
        result["counters"].update(first_success_control=7, first_success_policy_call=2)

    _edit_result(attempt, edit)


def _forged_outcome(attempt: Path) -> None:
    """A failed attempt's record says the native scorer ended it with a success."""

    def edit(result: dict[str, Any]) -> None:
        result.update(outcome="success", termination="native_success")

    _edit_result(attempt, edit)


def _settling_counter(attempt: Path) -> None:
    def edit(result: dict[str, Any]) -> None:
        result["counters"]["settling_controls"] += 1

    _edit_result(attempt, edit)


def _executed_counter(attempt: Path) -> None:
    """One more executed control in the result, and in the event log (else the log is
    not whole and the attempt not replayable): answering an observation never
    published, so the replay has nothing to execute it after."""

    def edit(result: dict[str, Any]) -> None:
        result["counters"]["executed_controls"] += 1

    _edit_result(attempt, edit)
    log = attempt / "events.jsonl"
    events = attempt_events(attempt)
    last = max(e["sequence"] for e in events if e["event"] == "observation_published")
    executed = [e for e in events if e["event"] == "actions_executed"][-1]
    extra = {**executed, "sequence": last + 1, "executed_prefix": executed["executed_prefix"][:1]}
    with log.open("a") as out:
        out.write(json.dumps(extra, sort_keys=True) + "\n")


# One edit per attempt: each case's recorded attempt, and a copy of it as a second
# attempt of the same case, replayed together (a simulator per worker, one per task).
EDITS: dict[str, tuple[Edit, str, str, str]] = {
    "a1 of the first case": (_forged_success, "first_success", "(7, 2)", "None"),
    "a2 of the first case": (_settling_counter, "settling_controls", "11", "10"),
    "a1 of the second case": (_forged_outcome, "native_outcome", "success", "no success"),
    "a2 of the second case": (_executed_counter, "executed_controls", "16", "15"),
}


def test_an_edited_end_of_episode_record_diverges_naming_the_field(
    recorded: Path, tmp_path: Path
) -> None:
    copy = _copy(recorded, tmp_path)
    firsts = sorted((copy / "episodes").iterdir())
    assert [p.name.endswith("-a1") for p in firsts] == [True, True]
    attempts = []
    for first in firsts:
        second = first.with_name(first.name[: -len("-a1")] + "-a2")
        shutil.copytree(first, second)
        _edit_result(second, partial(dict.update, attempt_id=second.name))
        attempts += [first, second]
    for attempt, (edit, *_) in zip(attempts, EDITS.values(), strict=True):
        edit(attempt)
    code, report, err = _replay(copy, "--workers", "2")
    assert code == 1, err
    verdicts = {v["attempt_id"]: v for v in report["verdicts"]}
    assert len(verdicts) == 4
    for attempt, (what, (_, field, was, found)) in zip(attempts, EDITS.items(), strict=True):
        verdict = verdicts[attempt.name]
        assert verdict["verdict"] == "diverged", (what, field, verdict)
        assert (verdict["field"], verdict["recorded"], verdict["replayed"]) == (field, was, found)


def test_an_edited_executed_count_alone_is_not_replayable(recorded: Path, tmp_path: Path) -> None:
    """Without its event log edited too, the count disagrees with the log: refused before
    any simulator is built."""
    copy = _copy(recorded, tmp_path)

    def edit(result: dict[str, Any]) -> None:
        result["counters"]["executed_controls"] += 1

    _edit_result(copy / "episodes" / FIRST, edit)
    code, report, _ = _replay(copy, "--case", FIRST)
    assert code == 1
    (verdict,) = report["verdicts"]
    assert verdict["verdict"] == "not_replayable"
    assert "the event log holds 15 executed controls, the result 16" in verdict["reason"]


def test_an_attempt_without_its_event_log_is_not_replayable(recorded: Path, tmp_path: Path) -> None:
    copy = _copy(recorded, tmp_path)
    (copy / "episodes" / FIRST / "events.jsonl").unlink()
    code, report, _ = _replay(copy, "--case", FIRST)
    assert code == 1
    (verdict,) = report["verdicts"]
    assert verdict["verdict"] == "not_replayable" and "events.jsonl" in verdict["reason"]
