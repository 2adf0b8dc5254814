"""The event log: deferred records keep their order and times, and nothing is lost."""

from __future__ import annotations

from pathlib import Path

import pytest
from mailroom.orchestrator.episode.evidence import EpisodeEvidence
from mailroom.orchestrator.records.layout import EVENTS_FILE
from recorded_events import attempt_events


def test_a_deferred_record_is_written_before_the_next_one_in_order(tmp_path: Path) -> None:
    evidence = EpisodeEvidence(tmp_path)
    evidence.event("response_claimed", sequence=1)
    evidence.defer_event("actions_executed", sequence=1)
    assert [e["event"] for e in attempt_events(tmp_path)] == ["response_claimed"]
    evidence.event("observation_published", sequence=2)
    log = attempt_events(tmp_path)
    assert [e["event"] for e in log] == [
        "response_claimed",
        "actions_executed",
        "observation_published",
    ]
    assert log[0]["t"] <= log[1]["t"] <= log[2]["t"]
    evidence.close()


def test_close_writes_what_is_still_deferred(tmp_path: Path) -> None:
    evidence = EpisodeEvidence(tmp_path)
    evidence.defer_event("actions_executed", sequence=3, executed_controls_total=15)
    evidence.close()
    (record,) = attempt_events(tmp_path)
    assert isinstance(record.pop("t"), float)
    assert record == {"event": "actions_executed", "sequence": 3, "executed_controls_total": 15}


def test_a_record_that_is_not_json_raises_and_loses_nothing(tmp_path: Path) -> None:
    evidence = EpisodeEvidence(tmp_path)
    evidence.defer_event("actions_executed", sequence=1)
    with pytest.raises(ValueError):
        evidence.event("bad", value=float("nan"))
    assert not (tmp_path / EVENTS_FILE).read_text()
    evidence.event("observation_published", sequence=2)
    assert [e["event"] for e in attempt_events(tmp_path)] == [
        "actions_executed",
        "observation_published",
    ]
    evidence.close()
