"""LIBERO-Para runs as a launch with external actors leaves them, read later without the
copy they were planned on: only their kept catalog names their cases' cells."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace

import pytest
import recorded_runs
from mailroom.benchmarks.libero_para.family import LIBERO_PARA
from mailroom.orchestrator.catalog.cases import Case
from mailroom.orchestrator.catalog.plans import render_plan
from mailroom.orchestrator.episode.settings import RunSettings
from mailroom.orchestrator.families.kept import keep_run_catalog
from mailroom.orchestrator.families.plans import build_plan
from mailroom.orchestrator.families.registry import catalog_entry
from mailroom.orchestrator.records.run_directory import RunDirectory
from para_copy import make_para_copy
from recorded_runs import write_result
from run_manifests import external_manifest

# The paraphrase cells of the copy's two Goal tasks: two cases each.
CELLS = ("action_synonym", "object_descriptive")


@pytest.fixture
def undeclared() -> Iterator[None]:
    """Whatever a test declares or pins, nothing stays declared or pinned after it."""
    yield
    LIBERO_PARA.source.declare(None)


def para_run(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, name: str) -> list[Case]:
    """A LIBERO-Para run (`tmp_path/name`) as a launch with external actors leaves it:
    manifest, plan and kept catalog; case 0 (action_synonym) succeeded, case 2
    (object_descriptive) left a result file that cannot be read (errored, named by the
    kept catalog alone), the other two unattempted. The copy is gone afterwards, as for
    a published run."""
    copy = tmp_path / f"{name}-copy"
    make_para_copy(copy, goal_tasks=(0, 1))
    LIBERO_PARA.declare_local_copy(copy)
    plan = build_plan("task_coverage", suite="libero_para", task_ids=[0, 1])
    cases = plan.to_cases()
    run = RunDirectory(tmp_path / name)
    manifest = external_manifest(
        tmp_path,
        RunSettings(proprio=False),
        plan=plan,
        run_id=name,
        record="full",
        run_dir=run.root,
        benchmark="libero_para",
    )
    run.write_manifest(manifest)
    run.plan_path.write_bytes(render_plan(plan))
    keep_run_catalog(run.root, "libero_para")
    run.event("launched", volatile=manifest["volatile"])
    cells = [catalog_entry(c.suite, c.task_index).cell for c in cases]  # type: ignore[attr-defined]
    assert cells == [CELLS[0], CELLS[0], CELLS[1], CELLS[1]], cells
    # The shared result writer reads entries from whichever catalog holds the suite.
    monkeypatch.setattr(recorded_runs, "load_catalog", lambda: SimpleNamespace(entry=catalog_entry))
    write_result(run, cases[0], 1, outcome="success", executed=5, proprio=False)
    broken = run.episode_dir(cases[2].attempt_id(1))
    broken.mkdir(parents=True)
    (broken / "result.json").write_text("{", encoding="utf-8")
    # Read elsewhere: no copy declared, nothing pinned but what a command pins itself.
    for path in copy.rglob("*.bddl"):
        path.unlink()
    LIBERO_PARA.source.declare(None)
    return cases
