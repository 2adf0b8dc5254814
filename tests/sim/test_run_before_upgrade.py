"""A run directory written before the records moved to one current version (by main at
7e2710c: manifest v6, result v7, the profile under the old `AgentPolicies/` folder; one
LIBERO-Goal episode of the diagnostic actor, sandboxed, `--record minimal`) still
reports, audits, exports, views and replays, read through the upgrade; the files
themselves are never rewritten."""

from __future__ import annotations

import hashlib
import json
import shutil
from pathlib import Path

import pytest
from conftest import REPO, run_cli

KEPT = REPO / "tests" / "support" / "data" / "run_before_upgrade" / "diagnostic_at_7e2710c"


def _digests(root: Path) -> dict[str, str]:
    return {
        p.relative_to(root).as_posix(): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(root.rglob("*"))
        if p.is_file()
    }


@pytest.fixture
def run(tmp_path: Path) -> Path:
    copy = tmp_path / "run"
    shutil.copytree(KEPT, copy)
    return copy


def test_the_kept_run_is_of_the_versions_before() -> None:
    manifest = json.loads((KEPT / "manifest.json").read_text())
    (result_file,) = KEPT.glob("episodes/*/result.json")
    assert manifest["schema"] == "mailroom.run_manifest/v6"
    assert json.loads(result_file.read_text())["schema"] == "mailroom.episode_result/v7"


def test_it_reports_audits_exports_and_views_without_a_file_rewritten(
    run: Path, tmp_path: Path
) -> None:
    before = _digests(run)
    events_before = (run / "events.jsonl").read_bytes()
    reported = run_cli("report", str(run), "--json")
    assert reported.returncode == 0, reported.stderr
    report = json.loads(reported.stdout)
    assert report["complete"] is True
    assert report["confinement_modes"] == {"sandbox": 1}

    audited = run_cli("audit", str(run))
    said = audited.stdout + audited.stderr
    (endpoint_record,) = run.glob("episodes/*/endpoint.json")
    endpoint = Path(json.loads(endpoint_record.read_text())["endpoint"])
    if endpoint.is_dir():  # on the machine the run was made on, while its mailbox stays
        assert audited.returncode == 0, said
        assert "clean: 1 attempts" in said
    else:
        # Anywhere else the episode's endpoint is gone with its machine: the audit says it
        # cannot check what the actor could read there, and finds nothing else.
        assert audited.returncode == 8, said
        assert f"endpoint directory {endpoint} no longer exists" in said
        assert "no leak found" in said and said.count("unverifiable") == 1, said

    out = tmp_path / "export"
    exported = run_cli("export", str(run), "--out", str(out), "--json")
    assert exported.returncode == 0, exported.stderr
    summary = json.loads(exported.stdout)
    assert summary["rows"]["episodes"] == 1 and summary["rows"]["steps"] > 0
    assert summary["skipped"] == []

    site = tmp_path / "site"
    viewed = run_cli("view", str(run), "--out", str(site))
    assert viewed.returncode == 0, viewed.stderr
    page = (site / "index.html").read_text()
    assert "libero_goal" in page

    # Only added to: the audit's verdict, and the run's events appended (never rewritten).
    after = _digests(run)
    added = {"audit.json", "events.jsonl"}
    assert {k: v for k, v in after.items() if k not in added} == {
        k: v for k, v in before.items() if k not in added
    }
    assert (run / "events.jsonl").read_bytes().startswith(events_before)


def test_it_replays_as_recorded(run: Path) -> None:
    replayed = run_cli("replay", str(run), "--json")
    assert replayed.returncode == 0, replayed.stdout[-2000:] + replayed.stderr[-2000:]
    verdicts = json.loads(replayed.stdout)
    assert "reproduced" in json.dumps(verdicts)
    assert "diverged" not in json.dumps(verdicts)
