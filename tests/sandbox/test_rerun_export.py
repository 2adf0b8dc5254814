"""`mailroom export --format rerun` on real runs of the toy family (a real `mailroom
launch`, its fake simulator, a sandboxed actor that acts one control per call and writes
markup in its notes), each recording read back with rerun's own reader (`RrdReader`) and
counted against the attempt's result document, events and steps.

- One recording per attempt; each camera holds one image per observation delivered, the
  bytes delivered, at the control count the observation showed the actor.
- One row per executed control in each action component's series, equal to steps.jsonl;
  proprio only when the run had it (a minimal record: actions from the executed prefixes,
  no images).
- One text entry per judged response, its notes verbatim (markup stays text), the
  feedback of a rejection; the native success event iff the result says success, at
  that control.
- `--attempt`: one recording; an unknown id is a usage error (exit 2); an attempt whose
  image is not the one delivered is skipped and listed (exit 4).
"""

from __future__ import annotations

import json
import shutil
import subprocess
from collections import defaultdict
from pathlib import Path
from typing import Any

import pytest
import toy_family_runs
from conftest import BIN, assert_usage_error, copied_actor, run_cli
from mailroom.hashing import sha256_bytes
from mailroom.orchestrator.results.steps_file import STATE_LAYOUT
from recorded_events import attempt_events
from rerun.chunk import RrdReader
from toy_family_runs import launch_toy, plan_toy

# The toy family's shape (tests/support/toy_family): one camera, components of its own.
ACTION_LAYOUT = ("vx", "vy", "vz", "wx", "wy", "wz", "grip")
CAMERAS = ("overhead",)

ACTOR = "stepwise_actor.py"
# rerun-sdk's own command line (its viewer and its file tools).
RERUN = BIN / "rerun"
# The actor's notes, as tests/support/actors/stepwise_actor.py writes them.
NOTES = (
    '<script>alert("note")</script><img src=x onerror="alert(1)">',
    "**bold** [a link](javascript:alert(2)) `code` & <b>tag</b>\nsecond line",
    "stopping: </span>{{ template }} ${shell}",
)
SUCCEEDS = "toyworld_shelf-t000-i00-o0-s20260907-a1"  # succeeds at its third control
STOPS = "toyworld_shelf-t001-i00-o0-s20260907-a1"  # the plum task: stops at call 3

Rows = dict[str, list[dict[str, Any]]]

# A fixture of tests/support, used by name.
toy_env = toy_family_runs.toy_env


def _launch(
    base: Path, env: dict[str, str], mailbox: Path, *options: str
) -> tuple[Path, subprocess.CompletedProcess[str]]:
    """A real launch of the toy family's two tasks; the run directory and its export."""
    actor = copied_actor(base / "actors", ACTOR)
    plan = plan_toy(base / "plan.json", "toyworld_shelf", env)
    run_dir = base / "run"
    launch_toy(
        plan,
        run_dir,
        mailbox,
        env,
        *("--actor", f"python3 {actor} {{endpoint}}", "--max-policy-calls", "8", *options),
    )
    exported = run_cli(
        *("export", str(run_dir), "--format", "rerun", "--out", str(base / "rrd"), "--json"),
        env=env,
    )
    return run_dir, exported


@pytest.fixture(scope="module")
def full_run(
    toy_env: dict[str, str], tmp_path_factory: pytest.TempPathFactory, module_mailbox_root: Path
) -> tuple[Path, subprocess.CompletedProcess[str]]:
    base = tmp_path_factory.mktemp("rerun-full")
    return _launch(base, toy_env, module_mailbox_root / "rerun-full", "--proprio")


@pytest.fixture(scope="module")
def minimal_run(
    toy_env: dict[str, str], tmp_path_factory: pytest.TempPathFactory, module_mailbox_root: Path
) -> tuple[Path, subprocess.CompletedProcess[str]]:
    base = tmp_path_factory.mktemp("rerun-minimal")
    return _launch(base, toy_env, module_mailbox_root / "rerun-minimal", "--record", "minimal")


def read_recording(path: Path) -> Rows:
    """Every row the recording holds on a timeline, by entity path, in control order:
    read with rerun's own reader."""
    reader = RrdReader(path)
    (store,) = reader.recordings()
    assert store.recording_id == path.stem
    rows: Rows = defaultdict(list)
    for chunk in reader.stream():
        if chunk.is_static:
            continue
        assert chunk.timeline_names == ["control"], chunk.entity_path
        rows[chunk.entity_path].extend(chunk.to_record_batch().to_pylist())
    for entity in rows.values():
        entity.sort(key=lambda row: row["control"])
    return dict(rows)


def _texts(rows: Rows, entity: str) -> list[str]:
    return [text for row in rows.get(entity, []) for text in row["TextLog:text"]]


def _jsonl(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


def _attempt(run_dir: Path, attempt_id: str) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    directory = run_dir / "episodes" / attempt_id
    result = json.loads((directory / "result.json").read_text())
    return result, attempt_events(directory)


def _summary(exported: subprocess.CompletedProcess[str]) -> dict[str, Any]:
    assert exported.returncode == 0, exported.stderr
    document: dict[str, Any] = json.loads(exported.stdout)
    assert document["format"] == "rerun" and document["skipped"] == []
    return document


def _check_recording(run_dir: Path, attempt_id: str, file: Path, *, full: bool) -> Rows:
    """The recording's counts and contents against the attempt's own records."""
    directory = run_dir / "episodes" / attempt_id
    result, events = _attempt(run_dir, attempt_id)
    counters = result["counters"]
    rows = read_recording(file)
    published = [e for e in events if e["event"] == "observation_published"]
    assert published
    for camera in CAMERAS:
        images = rows.get(f"/cameras/{camera}", [])
        if not full:  # a minimal record keeps no images
            assert images == []
            continue
        assert len(images) == len(published)
        for row, event in zip(images, published, strict=True):
            data = bytes(row["EncodedImage:blob"][0])
            assert sha256_bytes(data) == event["image_sha256"][camera]  # as delivered
            shown = json.loads(
                (directory / "observations" / f"obs-{event['sequence']}.json").read_text()
            )
            assert row["control"] == shown["counters"]["executed_controls"]
    # Actions: one row per executed control in every component's series.
    executed = counters["executed_controls"]
    if full:
        expected = [step["action"] for step in _jsonl(directory / "steps.jsonl")]
    else:
        expected = [
            a for e in events if e["event"] == "actions_executed" for a in e["executed_prefix"]
        ]
    assert len(expected) == executed > 0
    for n, component in enumerate(ACTION_LAYOUT):
        series = rows[f"/action/{component}"]
        assert [row["control"] for row in series] == list(range(executed))
        assert [row["Scalars:scalars"][0] for row in series] == pytest.approx(
            [a[n] for a in expected]
        )
    proprio = [entity for entity in rows if entity.startswith("/proprio/")]
    if result["settings"]["proprio"]:
        assert sorted(proprio) == sorted(f"/proprio/{name}" for name in STATE_LAYOUT)
        assert all(len(rows[entity]) == executed for entity in proprio)
    else:
        assert proprio == []
    # One text entry per judged response; the native success event iff the result says so.
    assert len(_texts(rows, "/decisions")) == counters["policy_calls"]
    success = counters["first_success_control"]
    if result["outcome"] == "success":
        assert success is not None
        (event,) = rows["/native_success"]
        assert event["control"] == success
    else:
        assert success is None and "/native_success" not in rows
    return rows


def test_one_recording_per_attempt_counted_against_the_result(
    full_run: tuple[Path, subprocess.CompletedProcess[str]],
) -> None:
    run_dir, exported = full_run
    document = _summary(exported)
    written = {r["attempt_id"]: r for r in document["recordings"]}
    assert sorted(written) == [SUCCEEDS, STOPS]
    for attempt_id, recording in written.items():
        file = Path(recording["file"])
        assert file.name == f"{attempt_id}.rrd" and file.is_file()
        _check_recording(run_dir, attempt_id, file, full=True)
        result, events = _attempt(run_dir, attempt_id)
        observations = sum(e["event"] == "observation_published" for e in events)
        assert recording["observations"] == observations
        assert recording["images"] == dict.fromkeys(CAMERAS, observations)
        assert recording["controls"] == result["counters"]["executed_controls"]
        assert recording["decisions"] == result["counters"]["policy_calls"]
        assert recording["native_success_control"] == result["counters"]["first_success_control"]
    # What this actor makes of the two tasks, so the checks above cover both endings.
    assert written[SUCCEEDS]["native_success_control"] == 3
    assert written[SUCCEEDS]["decisions"] == 4 and written[SUCCEEDS]["controls"] == 3
    assert written[STOPS]["native_success_control"] is None
    assert written[STOPS]["decisions"] == 3 and written[STOPS]["controls"] == 1
    # rerun's own command checks that each file loads and is interpreted without error.
    files = [r["file"] for r in written.values()]
    verified = subprocess.run(
        [str(RERUN), "rrd", "verify", *files], capture_output=True, text=True, timeout=120
    )
    assert verified.returncode == 0, verified.stdout + verified.stderr


def test_an_actors_notes_are_kept_verbatim_as_text_beside_each_verdict(
    full_run: tuple[Path, subprocess.CompletedProcess[str]],
) -> None:
    run_dir, exported = full_run
    files = {r["attempt_id"]: Path(r["file"]) for r in _summary(exported)["recordings"]}
    succeeded = read_recording(files[SUCCEEDS])
    assert _texts(succeeded, "/decisions/note") == list(NOTES[:2])
    verdicts = _texts(succeeded, "/decisions")
    assert verdicts[0].startswith("policy call 1: accepted")
    assert verdicts[1].startswith("policy call 2: rejected")
    levels = [row["TextLog:level"][0] for row in succeeded["/decisions"]]
    assert levels == ["INFO", "WARN", "INFO", "INFO"]
    # The rejection's feedback, as the next observation carried it to the actor.
    (feedback,) = _texts(succeeded, "/decisions/feedback")
    _, events = _attempt(run_dir, SUCCEEDS)
    (carried,) = [
        e["feedback"]
        for e in events
        if e["event"] == "observation_published" and e["sequence"] == 3
    ]
    assert json.loads(feedback) == carried and carried is not None
    stopped = read_recording(files[STOPS])
    assert _texts(stopped, "/decisions/note") == list(NOTES)
    assert _texts(stopped, "/decisions")[-1] == "policy call 3: stop"
    assert _texts(stopped, "/episode") == ["failure, termination actor_stop"]


def test_a_minimal_record_has_its_actions_and_no_images_or_proprio(
    minimal_run: tuple[Path, subprocess.CompletedProcess[str]],
) -> None:
    run_dir, exported = minimal_run
    document = _summary(exported)
    assert len(document["recordings"]) == 2
    for recording in document["recordings"]:
        assert recording["images"] == dict.fromkeys(CAMERAS, 0) and not recording["proprio"]
        _check_recording(run_dir, recording["attempt_id"], Path(recording["file"]), full=False)


def test_attempt_selects_one_and_an_unknown_id_is_a_usage_error(
    full_run: tuple[Path, subprocess.CompletedProcess[str]],
    toy_env: dict[str, str],
    tmp_path: Path,
) -> None:
    run_dir, _ = full_run
    out = tmp_path / "one"
    chosen = run_cli(
        *("export", str(run_dir), "--format", "rerun", "--attempt", STOPS),
        *("--out", str(out), "--json"),
        env=toy_env,
    )
    assert [r["attempt_id"] for r in _summary(chosen)["recordings"]] == [STOPS]
    assert sorted(p.name for p in out.iterdir()) == [f"{STOPS}.rrd"]
    unknown = run_cli(
        *("export", str(run_dir), "--format", "rerun", "--attempt", "no-such-attempt-a1"),
        *("--out", str(tmp_path / "none")),
        env=toy_env,
    )
    assert_usage_error(unknown, "no attempt 'no-such-attempt-a1'")
    assert SUCCEEDS in unknown.stderr  # the attempts it has are named
    assert not (tmp_path / "none").exists()
    parquet = run_cli("export", str(run_dir), "--attempt", STOPS, env=toy_env)
    assert_usage_error(parquet, "--attempt applies to --format rerun and atif only")


def test_an_image_that_is_not_the_one_delivered_skips_its_attempt(
    full_run: tuple[Path, subprocess.CompletedProcess[str]],
    toy_env: dict[str, str],
    tmp_path: Path,
) -> None:
    run_dir = Path(shutil.copytree(full_run[0], tmp_path / "run"))
    image = run_dir / "episodes" / SUCCEEDS / "observations" / f"obs-2-{CAMERAS[0]}.png"
    image.write_bytes(image.read_bytes() + b"\0")
    out = tmp_path / "rrd"
    exported = run_cli(
        *("export", str(run_dir), "--format", "rerun", "--out", str(out), "--json"), env=toy_env
    )
    assert exported.returncode == 4, exported.stderr
    document = json.loads(exported.stdout)
    assert [r["attempt_id"] for r in document["recordings"]] == [STOPS]
    (skipped,) = document["skipped"]
    assert skipped["file"] == f"episodes/{SUCCEEDS}"
    assert "is not the image its observation delivered" in skipped["reason"]
    assert sorted(p.name for p in out.iterdir()) == [f"{STOPS}.rrd"]  # no partial file
