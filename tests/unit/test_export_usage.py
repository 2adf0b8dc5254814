"""`mailroom export --format parquet` of provider usage: each episode's `usage.*` columns
(null with the reason where nothing was metered, never 0) and the per-request table read
from each attempt's provider-requests.jsonl, a file that cannot be trusted skipped and
said (run directories made here: tests/support/metered_runs.py)."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from mailroom.orchestrator.records.layout import AttemptPaths
from mailroom.orchestrator.results.export import USAGE_COLUMNS, export_parquet
from mailroom.orchestrator.results.provider_requests import REQUEST_COLUMNS
from metered_runs import DECLARED, HOSTILE_MODEL, usage_run
from parquet_exports import column, export


def test_episodes_carry_what_was_metered_and_nulls_with_the_reason_elsewhere(
    tmp_path: Path,
) -> None:
    run, cases = usage_run(tmp_path)
    proc, summary = export(str(run.root))
    assert proc.returncode == 0, proc.stderr
    assert summary["rows"] == {"episodes": 5, "steps": 0, "provider_requests": 7}
    out = run.root / "export"
    assert summary["files"]["provider_requests"] == str(out / "provider_requests.parquet")
    episodes = pq.read_table(out / "episodes.parquet")
    for name, kind in USAGE_COLUMNS:
        assert episodes.schema.field(name).type == kind, name
    assert column(episodes, "attempt_id") == [c.attempt_id(1) for c in cases]
    assert column(episodes, "usage.unmetered_reason") == [
        None,
        None,
        None,
        "external_actor",
        "before_v7",
    ]
    assert column(episodes, "usage.provider") == ["anthropic"] * 3 + [None, None]
    assert column(episodes, "usage.requests") == [3, 2, 1, None, None]
    assert column(episodes, "usage.refused_requests") == [0, 1, 0, None, None]
    assert column(episodes, "usage.failed_requests") == [1, 0, 1, None, None]
    assert column(episodes, "usage.input_tokens") == [5000, 2000, 0, None, None]
    assert column(episodes, "usage.cache_read_tokens") == [500, 0, 0, None, None]
    costs = column(episodes, "usage.cost_usd")
    assert costs[0] == pytest.approx(0.03) and costs[1:] == [None, 0.0, None, None]
    assert column(episodes, "usage.cost_note")[:3] == [None, f"no price for {HOSTILE_MODEL}", None]
    assert column(episodes, "usage.declared_model") == [DECLARED] * 3 + [None, None]
    assert column(episodes, "usage.model_verified") == [True, False, None, None, None]
    assert column(episodes, "usage.answering_models") == [
        [DECLARED],
        [HOSTILE_MODEL, DECLARED],  # sorted by name, as the result keeps them
        [],
        None,
        None,
    ]
    times = column(episodes, "usage.provider_time_ms")
    assert times[:3] == pytest.approx([2050.0, 1600.0, 50.0]) and times[3:] == [None, None]
    assert column(episodes, "truncation")[1] == "provider_budget"
    assert column(episodes, "error_codes")[2] == ["provider_unavailable"]


def test_each_request_is_a_row_keyed_by_its_episode(tmp_path: Path) -> None:
    run, cases = usage_run(tmp_path)
    summary = export_parquet(run.root)
    assert summary.skipped == [] and summary.requests == 7
    requests = pq.read_table(summary.requests_file)
    assert requests.schema.names == [name for name, _ in REQUEST_COLUMNS]
    assert requests.schema.field("episode_index").type == pa.int64()
    assert not requests.schema.field("episode_index").nullable
    assert column(requests, "episode_index") == [0, 0, 0, 1, 1, 1, 2]
    assert column(requests, "attempt_id")[3] == cases[1].attempt_id(1)
    assert column(requests, "request_index") == [0, 1, 2, 0, 1, 2, 0]
    assert column(requests, "decision") == [0, 1, 1, 1, 2, 2, 1]
    assert column(requests, "outcome") == [
        "answered",
        "answered",
        "provider_fault",
        "answered",
        "answered",
        "refused",
        "provider_fault",
    ]
    assert column(requests, "answered_model")[4] == HOSTILE_MODEL  # as the provider said it
    assert column(requests, "status") == [200, 200, 529, 200, 200, 403, 529]
    assert column(requests, "cost_usd")[:2] == [0.01, 0.02]
    assert column(requests, "cost_usd")[4] is None
    assert column(requests, "input_tokens")[2] is None  # a fault reports no usage
    assert all(t > 0 for t in column(requests, "finished_unix_s"))
    assert json.loads(requests.schema.metadata[b"mailroom"])["run_id"] == "run-usage-test"


def test_a_requests_file_that_cannot_be_trusted_is_skipped_and_said(tmp_path: Path) -> None:
    run, cases = usage_run(tmp_path)
    first = AttemptPaths(run.episode_dir(cases[0].attempt_id(1))).provider_requests
    lines = first.read_text().splitlines(keepends=True)
    first.write_text("".join(lines[:-1]))  # one forwarded request fewer than the result's
    second = AttemptPaths(run.episode_dir(cases[1].attempt_id(1))).provider_requests
    second.write_text(second.read_text() + '{"event": "provider_request", "t": 1}\n')
    third = AttemptPaths(run.episode_dir(cases[2].attempt_id(1))).provider_requests
    third.write_text(third.read_text() + '{"t": 2.0, "event": "provider_re')  # torn: dropped

    proc, summary = export(str(run.root))

    assert proc.returncode == 4, proc.stderr
    assert summary["skipped"] == [
        {
            "file": f"episodes/{cases[0].attempt_id(1)}/provider-requests.jsonl",
            "reason": "2 forwarded and 0 refused requests, where the result counts 3 and 0",
        },
        {
            "file": f"episodes/{cases[1].attempt_id(1)}/provider-requests.jsonl",
            "reason": "line 4: not a request record",
        },
    ]
    out = run.root / "export"
    requests = pq.read_table(out / "provider_requests.parquet")
    assert column(requests, "episode_index") == [2]
    episodes = pq.read_table(out / "episodes.parquet")
    assert column(episodes, "usage.requests") == [3, 2, 1, None, None]  # the results' own
