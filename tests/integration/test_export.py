"""`mailroom export RUN --format parquet` on real run directories, read back with pyarrow."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from mailroom.benchmarks.libero.catalog import load_catalog
from mailroom.orchestrator.catalog.cases import Case
from mailroom.orchestrator.episode.video import EpisodeVideo
from mailroom.orchestrator.records.result import Enforcement
from mailroom.orchestrator.records.run_directory import RunDirectory
from mailroom.orchestrator.results.steps_file import StepsFileError, read_steps
from older_records import result_as_v5
from parquet_exports import column, export
from recorded_runs import make_run, write_result

CAMERAS = ("agentview", "robot0_eye_in_hand")
FLOAT32_LIST_7 = pa.list_(pa.float32(), 7)
FLOAT32_LIST_9 = pa.list_(pa.float32(), 9)


# a real run directory (its manifest and results: tests/support/recorded_runs.py) -------


def action(i: int) -> list[float]:
    return [0.01 * i, -0.02 * i, 0.5, 0.0, 0.1, -0.1, 1.0 if i % 2 else -1.0]


def state(i: int) -> list[float]:
    return [0.1 * i + j for j in range(7)] + [0.04, -0.04]


def write_steps(
    run: RunDirectory,
    case: Case,
    attempt: int,
    count: int,
    *,
    proprio: bool,
    success_at: int | None = None,
    torn_tail: bool = False,
) -> list[dict[str, Any]]:
    lines: list[dict[str, Any]] = []
    for i in range(count):
        line: dict[str, Any] = {
            "frame_index": i,
            "policy_call": i // 5 + 1,
            "action": action(i),
            "native_success": success_at is not None and i >= success_at,
        }
        if proprio:
            line["state"] = state(i)
        lines.append(line)
    text = "".join(json.dumps(line) + "\n" for line in lines)
    if torn_tail:
        text += '{"frame_index": ' + str(count) + ', "policy_ca'
    path = run.episode_dir(case.attempt_id(attempt)) / "steps.jsonl"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return lines


START = [0.5, 0.4, 0.3, 0.2, 0.1, 0.0, -0.1, 0.039, -0.039]  # before the first control


def write_first_observation(run: RunDirectory, case: Case, attempt: int) -> None:
    """The first observation's proprioception: the state the first control started from."""
    path = run.episode_dir(case.attempt_id(attempt)) / "observations" / "obs-1.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    proprio = {"joint_pos": START[:7], "gripper_qpos": START[7:]}
    path.write_text(json.dumps({"instruction": "do it", "proprio": proprio}), encoding="utf-8")


def write_videos(run: RunDirectory, case: Case, attempt: int, frames: int) -> None:
    video = EpisodeVideo(run.episode_dir(case.attempt_id(attempt)), CAMERAS)
    for i in range(frames):
        image = np.full((32, 32, 3), 8 * i, dtype=np.uint8)
        video.add({camera: image for camera in CAMERAS})
    video.finish()


def assert_no_temporaries(directory: Path) -> None:
    assert sorted(p.name for p in directory.iterdir()) == [
        "episodes.parquet",
        "provider_requests.parquet",
        "steps.parquet",
    ]


def assert_float32_rows(got: Sequence[Sequence[float]], want: Sequence[Sequence[float]]) -> None:
    np.testing.assert_array_equal(np.asarray(got), np.asarray(want, dtype=np.float32))


# the command ---------------------------------------------------------------------------


def test_export_keeps_every_result_flags_superseded_and_lists_what_it_skipped(
    tmp_path: Path,
) -> None:
    run, (case0, case1) = make_run(tmp_path, proprio=False)
    # case 0: attempt 1 was interrupted (no steps file), attempt 2 succeeded, with videos
    write_result(run, case0, 1, outcome="error", executed=7, proprio=False, interrupted=True)
    held = Enforcement(memory="enforced", writable_space="kernel")
    write_result(
        run,
        case0,
        2,
        outcome="success",
        executed=5,
        proprio=False,
        simulator="parked",
        enforcement=held,
    )
    write_steps(run, case0, 2, 5, proprio=False, success_at=4)
    write_videos(run, case0, 2, frames=5)
    # case 1: attempt 1 failed (a v5 result); attempt 2's result is corrupt; attempt 3 has
    # none yet
    write_result(run, case1, 1, outcome="failure", executed=3, proprio=False)
    result_as_v5(run.episode_dir(case1.attempt_id(1)) / "result.json")
    write_steps(run, case1, 1, 3, proprio=False)
    run.episode_dir(case1.attempt_id(2)).mkdir()
    (run.episode_dir(case1.attempt_id(2)) / "result.json").write_text("{ not json")
    run.episode_dir(case1.attempt_id(3)).mkdir()
    run.event("leak_disclosed", attempt_id=case1.attempt_id(1))

    proc, summary = export(str(run.root))

    assert proc.returncode == 4, proc.stderr  # exported, but something was skipped
    out = run.root / "export"
    assert summary["out"] == str(out)
    assert summary["rows"] == {"episodes": 3, "steps": 8, "provider_requests": 0}
    assert summary["proprio"] is False
    assert {s["file"] for s in summary["skipped"]} == {
        f"episodes/{case1.attempt_id(2)}/result.json",
        f"episodes/{case1.attempt_id(3)}/result.json",
    }
    assert_no_temporaries(out)

    episodes = pq.read_table(out / "episodes.parquet")
    assert episodes.num_rows == 3
    for name in ("episode_index", "task_index", "init_state_index", "seed", "executed_controls"):
        assert episodes.schema.field(name).type == pa.int64(), name
    for camera in CAMERAS:
        assert episodes.schema.field(f"videos.{camera}").type == pa.string()
    assert column(episodes, "episode_index") == [0, 1, 2]
    assert column(episodes, "attempt_id") == [
        case0.attempt_id(1),
        case0.attempt_id(2),
        case1.attempt_id(1),
    ]
    assert column(episodes, "superseded") == [True, False, False]
    assert column(episodes, "outcome") == ["error", "success", "failure"]
    assert column(episodes, "termination") == ["infrastructure_error", "native_success", None]
    assert column(episodes, "truncation") == [None, None, "policy_call_cap"]
    assert column(episodes, "executed_controls") == [7, 5, 3]
    assert column(episodes, "first_success_control") == [None, 5, None]
    assert column(episodes, "error_codes") == [["interrupted"], [], []]
    assert column(episodes, "steps") == [None, 5, 3]  # interrupted: no steps file, still a row
    assert column(episodes, "blinded") == [True, True, False]
    assert column(episodes, "leak_disclosed") == [False, False, True]
    assert episodes.schema.field("simulator").type == pa.string()
    assert column(episodes, "simulator") == ["dedicated", "parked", "dedicated"]
    # What the kernel enforced: an external actor nothing, a v5 result does not say.
    for name in ("enforcement.memory", "enforcement.writable_space"):
        assert episodes.schema.field(name).type == pa.string()
    assert column(episodes, "enforcement.memory") == ["not enforced", "enforced", None]
    assert column(episodes, "enforcement.writable_space") == ["sampled", "kernel", None]
    assert column(episodes, "suite") == ["libero_10"] * 3
    assert column(episodes, "task_index") == [0, 0, 1]
    assert column(episodes, "seed") == [case0.seed] * 3
    assert column(episodes, "bddl_sha256") == ["b" * 64] * 3
    entry = load_catalog().entry(case1.suite, case1.task_index)
    assert column(episodes, "instruction")[2] == entry.instruction
    for camera in CAMERAS:
        paths = column(episodes, f"videos.{camera}")
        assert paths == [None, f"episodes/{case0.attempt_id(2)}/videos/{camera}.mp4", None]
        assert (run.root / paths[1]).is_file()

    steps = pq.read_table(out / "steps.parquet")
    assert steps.num_rows == 8
    assert steps.schema.names == [
        "episode_index",
        "frame_index",
        "timestamp",
        "action",
        "next.done",
        "next.success",
        "policy_call",
    ]  # no observation.state: the proprio track was off
    assert steps.schema.field("episode_index").type == pa.int64()
    assert steps.schema.field("frame_index").type == pa.int64()
    assert steps.schema.field("timestamp").type == pa.float32()
    assert steps.schema.field("action").type == FLOAT32_LIST_7
    assert steps.schema.field("next.done").type == pa.bool_()
    assert steps.schema.field("policy_call").type == pa.int64()
    assert column(steps, "episode_index") == [1] * 5 + [2] * 3
    assert column(steps, "frame_index") == [0, 1, 2, 3, 4, 0, 1, 2]
    np.testing.assert_array_equal(
        steps.column("timestamp").to_numpy(),
        np.asarray([0, 1, 2, 3, 4, 0, 1, 2], dtype=np.float32) / np.float32(20),
    )
    assert column(steps, "next.done") == [False] * 4 + [True] + [False] * 2 + [True]
    assert column(steps, "next.success") == [False] * 4 + [True] + [False] * 3
    assert column(steps, "policy_call") == [1] * 5 + [1] * 3
    assert_float32_rows(column(steps, "action"), [action(i) for i in (0, 1, 2, 3, 4, 0, 1, 2)])
    metadata = json.loads(steps.schema.metadata[b"mailroom"])
    assert metadata["fps"] == 20 and metadata["proprio"] is False

    # Exporting again replaces both files whole, with the same content.
    again, _ = export(str(run.root))
    assert again.returncode == 4
    assert_no_temporaries(out)
    assert pq.read_table(out / "steps.parquet").equals(steps)
    assert pq.read_table(out / "episodes.parquet").equals(episodes)


def test_proprio_runs_carry_observation_state_and_bad_steps_files_are_skipped(
    tmp_path: Path,
) -> None:
    run, (case0, case1) = make_run(tmp_path, proprio=True)
    write_result(run, case0, 1, outcome="success", executed=6, proprio=True)
    write_steps(run, case0, 1, 6, proprio=True, success_at=5, torn_tail=True)
    write_first_observation(run, case0, 1)
    # case 1 says 9 executed controls but its steps file holds 4: not trusted, skipped
    write_result(run, case1, 1, outcome="failure", executed=9, proprio=True)
    write_steps(run, case1, 1, 4, proprio=True)
    out = tmp_path / "elsewhere" / "export"

    proc, summary = export(str(run.root), "--out", str(out))

    assert proc.returncode == 4, proc.stderr
    assert summary["out"] == str(out)
    assert summary["rows"] == {"episodes": 2, "steps": 6, "provider_requests": 0}
    assert summary["proprio"] is True
    assert summary["skipped"] == [
        {
            "file": f"episodes/{case1.attempt_id(1)}/steps.jsonl",
            "reason": "4 steps for 9 executed controls",
        }
    ]
    assert_no_temporaries(out)
    assert not (run.root / "export").exists()

    episodes = pq.read_table(out / "episodes.parquet")
    assert column(episodes, "steps") == [6, None]  # the row stays; its steps do not
    assert column(episodes, "proprio") == [True, True]

    steps = pq.read_table(out / "steps.parquet")
    assert steps.schema.field("observation.state").type == FLOAT32_LIST_9
    assert steps.schema.names.index("observation.state") == 4  # after action, as LeRobot
    # Each row's state is the one before its action: the first observation's, then
    # where the control before ended (mailroom.export/v2).
    assert_float32_rows(column(steps, "observation.state"), [START] + [state(i) for i in range(5)])
    assert column(steps, "frame_index") == list(range(6))  # the torn last line is dropped
    assert column(steps, "next.done") == [False] * 5 + [True]
    assert column(steps, "policy_call") == [1] * 5 + [2]
    layout = json.loads(steps.schema.metadata[b"mailroom"])
    assert len(layout["state_names"]) == 9
    assert layout["format"] == "mailroom.export/v2"
    assert layout["observation_state"] == "before_action"


def test_a_proprio_episode_without_its_first_observation_has_no_steps(tmp_path: Path) -> None:
    run, (case0, _) = make_run(tmp_path, proprio=True)
    write_result(run, case0, 1, outcome="failure", executed=3, proprio=True)
    write_steps(run, case0, 1, 3, proprio=True)  # and no observations/obs-1.json

    proc, summary = export(str(run.root))

    assert proc.returncode == 4, proc.stderr
    [skipped] = summary["skipped"]
    assert skipped["file"] == f"episodes/{case0.attempt_id(1)}/steps.jsonl"
    assert "its first observation is unreadable" in skipped["reason"]
    steps = pq.read_table(run.root / "export" / "steps.parquet")
    assert steps.num_rows == 0


def test_a_clean_run_exits_zero_and_zero_control_episodes_have_no_steps(tmp_path: Path) -> None:
    run, (case0, case1) = make_run(tmp_path, proprio=False)
    write_result(run, case0, 1, outcome="failure", executed=0, proprio=False)
    write_steps(run, case0, 1, 0, proprio=False)  # the actor stopped at once
    write_result(run, case1, 1, outcome="success", executed=2, proprio=False)
    write_steps(run, case1, 1, 2, proprio=False, success_at=1)

    proc, summary = export(str(run.root))

    assert proc.returncode == 0, proc.stderr
    assert summary["skipped"] == []
    assert summary["rows"] == {"episodes": 2, "steps": 2, "provider_requests": 0}
    steps = pq.read_table(run.root / "export" / "steps.parquet")
    assert column(steps, "episode_index") == [1, 1]
    assert column(steps, "next.done") == [False, True]
    episodes = pq.read_table(run.root / "export" / "episodes.parquet")
    assert column(episodes, "steps") == [0, 2]
    assert column(episodes, "videos.agentview") == [None, None]


def test_a_run_without_results_exports_empty_tables_with_their_schemas(tmp_path: Path) -> None:
    run, _ = make_run(tmp_path, proprio=True)

    proc, summary = export(str(run.root))

    assert proc.returncode == 0, proc.stderr
    assert summary["rows"] == {"episodes": 0, "steps": 0, "provider_requests": 0}
    steps = pq.read_table(run.root / "export" / "steps.parquet")
    assert steps.num_rows == 0
    assert steps.schema.field("observation.state").type == FLOAT32_LIST_9
    episodes = pq.read_table(run.root / "export" / "episodes.parquet")
    assert episodes.num_rows == 0
    assert episodes.schema.field("episode_index").type == pa.int64()


def test_a_directory_that_is_not_a_run_is_a_usage_error(tmp_path: Path) -> None:
    proc, summary = export(str(tmp_path))
    assert proc.returncode == 2
    assert "not a run directory" in proc.stderr
    assert summary == {}
    assert list(tmp_path.iterdir()) == []


# steps.jsonl ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("line", "proprio", "message"),
    [
        ({"frame_index": 1}, False, "frame_index 1, expected 0"),
        ({"action": [0.0] * 6}, False, "list of 7 numbers"),
        ({"action": [0.0] * 6 + [True]}, False, "finite numbers"),
        ({"native_success": 1}, False, "native_success"),
        ({"policy_call": 0}, False, "policy_call"),
        ({"state": [0.0] * 9}, False, "proprio track was off"),
        ({}, True, "state must be a list of 9"),
    ],
)
def test_steps_lines_that_break_the_format_are_refused(
    tmp_path: Path, line: dict[str, Any], proprio: bool, message: str
) -> None:
    record: dict[str, Any] = {
        "frame_index": 0,
        "policy_call": 1,
        "action": [0.0] * 7,
        "native_success": False,
        **line,
    }
    path = tmp_path / "steps.jsonl"
    path.write_text(json.dumps(record) + "\n", encoding="utf-8")
    with pytest.raises(StepsFileError, match=message):
        read_steps(path, proprio=proprio, dimension=7)


def test_non_finite_numbers_are_refused(tmp_path: Path) -> None:
    path = tmp_path / "steps.jsonl"
    path.write_text(
        '{"frame_index": 0, "policy_call": 1, "native_success": false, '
        '"action": [NaN, 0, 0, 0, 0, 0, 0]}\n',
        encoding="utf-8",
    )
    with pytest.raises(StepsFileError, match="not JSON"):
        read_steps(path, proprio=False, dimension=7)
