"""`mailroom check-response` gives the loop's own reason codes, offline."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
from conftest import mailroom_exe
from instruction_examples import examples_by_kind
from mailbox_cases import CASES, LIMITS, MAX_CHUNK, REQUEST_ID, Case, verdict
from mailroom.mailbox.endpoint import create_endpoint
from mailroom.mailbox.protocol import PROTOCOL_V2
from mailroom.mailbox.receiver import ResponseReceiver, Silence
from mailroom.mailbox.watcher import InboxWatcher
from mailroom.orchestrator.actors.profiles import actor_instructions_template
from mailroom.orchestrator.transport.response_check import check_file

JUDGED = [c for c in CASES if c.expect[0] != "timeout"]
BY_NAME = {c.name: c for c in CASES}
# A few of each kind, through the real executable.
THROUGH_THE_CLI = [
    "act",
    "malformed_json",
    "nan_literal",
    "many_problems_in_order",
    "wrong_request_id",
    "symlink_to_a_file_outside",
    "fifo",
    "ten_megabytes",
]


def _put(case: Case, where: Path) -> Path:
    where.mkdir(parents=True, exist_ok=True)
    (where / "outside").mkdir(exist_ok=True)
    target = where / "resp-1.json"
    case.make(target, where / "outside")
    return target


def _as_verdict(report: dict[str, object]) -> tuple[str, tuple[str, ...]]:
    reasons = report["reasons"]
    assert isinstance(reasons, list)
    return (str(report["outcome"]), tuple(str(r) for r in reasons))


def _loop_verdict(case: Case, tmp_path: Path) -> tuple[str, tuple[str, ...]]:
    """The same case through the real loop: watcher, claim and parser."""
    endpoint = create_endpoint(tmp_path / "mailbox")
    outside = tmp_path / "outside"
    outside.mkdir()
    case.make(endpoint.response_file(1), outside)
    with InboxWatcher(endpoint.inbox) as watcher:
        receiver = ResponseReceiver(endpoint, tmp_path / "private", watcher)
        received = receiver.receive(1, REQUEST_ID, LIMITS, timeout_s=10.0)
    assert not isinstance(received, Silence)
    kind, codes = verdict(received.outcome)
    return ("accepted", ()) if kind == "accepted" else (kind, codes)


@pytest.mark.parametrize("case", JUDGED, ids=[c.name for c in JUDGED])
def test_the_offline_check_matches_the_loop_on_every_case(case: Case, tmp_path: Path) -> None:
    report = check_file(
        _put(case, tmp_path / "check"), request_id=REQUEST_ID, max_chunk=MAX_CHUNK, sequence=None
    )
    loop = _loop_verdict(case, tmp_path / "loop")
    assert _as_verdict(report) == loop
    # ... and both say what the case table says the protocol wants.
    assert loop == (("accepted", ()) if case.expect[0] == "accepted" else case.expect)


@pytest.mark.parametrize("name", THROUGH_THE_CLI)
def test_the_real_cli_prints_the_loops_reason_codes(name: str, tmp_path: Path) -> None:
    case = BY_NAME[name]
    file = _put(case, tmp_path / "check")
    proc = subprocess.run(
        [mailroom_exe(), "check-response", str(file), "--json", "--request-id", REQUEST_ID],
        capture_output=True,
        text=True,
        timeout=60,
    )
    report = json.loads(proc.stdout)
    assert _as_verdict(report) == _loop_verdict(case, tmp_path / "loop")
    assert proc.returncode == (0 if report["outcome"] == "accepted" else 1)
    assert len(report["messages"]) == len(report["reasons"])


def test_without_a_request_id_any_well_formed_id_is_taken(tmp_path: Path) -> None:
    file = _put(BY_NAME["wrong_request_id"], tmp_path)
    report = check_file(file, request_id=None, max_chunk=MAX_CHUNK, sequence=None)
    assert _as_verdict(report) == ("accepted", ())
    bomb = _put(BY_NAME["depth_bomb"], tmp_path / "bomb")
    report = check_file(bomb, request_id=None, max_chunk=MAX_CHUNK, sequence=None)
    assert _as_verdict(report) == ("invalid", ("too_deep",))


def test_the_file_name_is_checked_against_a_given_sequence(tmp_path: Path) -> None:
    file = _put(BY_NAME["act"], tmp_path)
    ok = check_file(file, request_id=REQUEST_ID, max_chunk=MAX_CHUNK, sequence=1)
    assert _as_verdict(ok) == ("accepted", ())
    wrong = check_file(file, request_id=REQUEST_ID, max_chunk=MAX_CHUNK, sequence=2)
    assert _as_verdict(wrong) == ("protocol_error", ("wrong_file_name",))


def test_the_human_output_lists_codes_and_exits_nonzero(tmp_path: Path) -> None:
    file = _put(BY_NAME["many_problems_in_order"], tmp_path)
    proc = subprocess.run(
        [mailroom_exe(), "check-response", str(file), "--request-id", REQUEST_ID],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 1 and proc.stdout == ""
    for code in BY_NAME["many_problems_in_order"].expect[1]:
        assert f"{code}:" in proc.stderr


def _check_against(observation: Path, response: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [
            *(mailroom_exe(), "check-response", str(response)),
            *("--observation", str(observation), "--json"),
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_a_response_is_checked_against_the_observation_it_answers(tmp_path: Path) -> None:
    """With --observation (here protocol v2's example: 4 numbers in [-1, 1]) the response
    is held to that observation's request id, sequence, version and action spec."""
    examples = examples_by_kind(actor_instructions_template("v3"), PROTOCOL_V2.response_schema)
    [published] = examples["mailroom.observation/v2"]
    observation = tmp_path / "obs-3.json"
    observation.write_text(json.dumps(published), encoding="utf-8")
    [act] = examples["response-act"]
    good = tmp_path / "resp-3.json"
    good.write_text(json.dumps(act), encoding="utf-8")
    accepted = _check_against(observation, good)
    assert accepted.returncode == 0 and json.loads(accepted.stdout)["outcome"] == "accepted"
    seven = {**act, "actions": [[0.0] * 7]}
    good.write_text(json.dumps(seven), encoding="utf-8")
    refused = _check_against(observation, good)
    assert refused.returncode == 1
    assert json.loads(refused.stdout)["reasons"] == ["wrong_vector_length"]
    # Named for another observation: the loop would end the episode.
    other = tmp_path / "resp-4.json"
    other.write_text(json.dumps(act), encoding="utf-8")
    assert json.loads(_check_against(observation, other).stdout)["reasons"] == ["wrong_file_name"]
    observation.write_text(json.dumps({**published, "sequence": 0}), encoding="utf-8")
    bad = _check_against(observation, good)
    assert bad.returncode == 2 and "is not a valid mailroom.observation/v2" in bad.stderr
