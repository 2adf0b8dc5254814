"""LIBERO-Para from a local copy: matching, refusals, hashes, cells, plans and the CLI.

The copy is made here from the installed LIBERO-Goal BDDL files (`para_copy.py`): the
loading code is the real one, the data small.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from conftest import run_cli
from mailroom.benchmarks.libero.catalog import catalog_sha256, load_catalog
from mailroom.benchmarks.libero_para.family import LIBERO_PARA
from mailroom.benchmarks.libero_para.local_copy import (
    PARA_CATALOG_FILE,
    PARA_DIR_VARIABLE,
    ParaCopyError,
    ParaEntry,
    para_catalog_sha256,
    parse_para_catalog,
    read_para_copy,
    render_para,
)
from mailroom.benchmarks.libero_para.scene import resolve_para
from mailroom.hashing import sha256_file
from mailroom.orchestrator.actors.hidden_paths import evaluator_paths
from mailroom.orchestrator.catalog.entries import CatalogError, TaskIndexError
from mailroom.orchestrator.catalog.plans import (
    PLAN_SCHEMA,
    PlanCatalogMismatchError,
    PlanOptionError,
    write_plan,
)
from mailroom.orchestrator.families.kept import KeptCatalogError, pin_run_catalog
from mailroom.orchestrator.families.plans import build_plan, load_plan
from mailroom.orchestrator.families.registry import catalog_entry, reference_horizon
from para_copy import REVISION, make_para_copy, paraphrased
from sandboxed_starts import run_once_in_sandbox, sandbox_launcher


@pytest.fixture
def copy(tmp_path: Path) -> Iterator[tuple[Path, dict[str, str]]]:
    root = tmp_path / "LIBERO-Para"
    expected = make_para_copy(root)
    LIBERO_PARA.declare_local_copy(root)
    yield root, expected
    LIBERO_PARA.source.declare(None)


def test_each_paraphrase_is_matched_to_its_goal_task_by_content(
    copy: tuple[Path, dict[str, str]],
) -> None:
    root, expected = copy
    found = read_para_copy(root)
    assert found.revision == REVISION
    assert found.goal_catalog_sha256 == catalog_sha256()
    assert [e.para_path for e in found.entries] == sorted(expected)
    assert found.cells == {"action_synonym": 3, "object_descriptive": 3}
    for entry in found.entries:
        goal = load_catalog().entry("libero_goal", entry.goal_task_index)
        # The files are named goal_<N>.bddl here, but the match is by content.
        assert entry.para_path.endswith(f"goal_{entry.goal_task_index}.bddl")
        assert entry.instruction == expected[entry.para_path] != goal.instruction
        assert entry.goal_instruction == goal.instruction
        assert entry.cell == entry.para_path.split("/")[0]
        assert (entry.bddl_path, entry.bddl_sha256) == (goal.bddl_path, goal.bddl_sha256)
        assert entry.init_states_sha256 == goal.init_states_sha256
        assert entry.n_init_states == 50
    assert reference_horizon("libero_para").controls == 300


def test_a_misleading_file_name_does_not_decide_the_match(
    copy: tuple[Path, dict[str, str]],
) -> None:
    root, _ = copy
    (root / "action_synonym" / "goal_0.bddl").write_text(paraphrased(2, "swap"), "utf-8")
    entry = next(e for e in read_para_copy(root).entries if e.para_path.endswith("goal_0.bddl"))
    assert entry.goal_task_index == 2


def test_files_that_do_not_parse_or_change_the_scene_or_goal_are_refused(
    copy: tuple[Path, dict[str, str]],
) -> None:
    root, _ = copy
    refused = {r.para_path: r.reason for r in read_para_copy(root).refused}
    assert set(refused) == {
        "broken/unbalanced.bddl",
        "broken/moved_scene.bddl",
        "broken/changed_goal.bddl",
    }
    assert refused["broken/unbalanced.bddl"].startswith("does not parse")
    assert "problem and scene" in refused["broken/moved_scene.bddl"]
    assert refused["broken/changed_goal.bddl"].startswith(
        "differs from LIBERO-Goal task 2 beyond its language line"
    )
    assert "(:goal" in refused["broken/changed_goal.bddl"]


def test_links_odd_names_empty_or_long_language_are_refused(
    copy: tuple[Path, dict[str, str]],
) -> None:
    root, _ = copy
    (root / "linked").mkdir()
    (root / "linked" / "l.bddl").symlink_to(root / "action_synonym" / "goal_0.bddl")
    (root / "quiet").mkdir()
    (root / "quiet" / "q.bddl").write_text(paraphrased(0, ""), "utf-8")
    (root / "bad cell").mkdir()
    (root / "bad cell" / "b.bddl").write_text(paraphrased(0, "fine"), "utf-8")
    (root / "long").mkdir()
    (root / "long" / "l.bddl").write_text(paraphrased(0, "word " * 500), "utf-8")
    (root / os.fsdecode(b"\xff.bddl")).write_text(paraphrased(0, "fine"), "utf-8")
    (root / "huge.bddl").write_bytes(b" " * (2 * 1024 * 1024))
    found = read_para_copy(root)
    refused = {r.para_path: r.reason for r in found.refused}
    assert refused["linked/l.bddl"].startswith("a link outside the copy's blob store")
    assert refused["quiet/q.bddl"] == "has no language line"
    assert refused["bad cell/b.bddl"].startswith("its path is not letters")
    assert refused["long/l.bddl"] == "its language is longer than an observation's 2000"
    assert refused["\\udcff.bddl"].startswith("its path is not letters")  # spelled out
    assert refused["huge.bddl"] == "larger than 1048576 bytes"
    assert len(found.entries) == 6
    # The catalog of an odd copy still renders, and reads back as it was, refusals and
    # the undecodable name included.
    assert parse_para_catalog(render_para(found)) == found


def test_revision_files_are_bounded_plain_and_not_links(
    copy: tuple[Path, dict[str, str]], tmp_path: Path
) -> None:
    root, _ = copy
    for content in ("[/oops]", "x" * 300, "two words"):
        (root / "REVISION").write_text(content, "utf-8")
        with pytest.raises(ParaCopyError, match="does not hold a revision"):
            read_para_copy(root)
    (root / "REVISION").write_bytes(b"\xff\xfe")
    with pytest.raises(ParaCopyError, match="does not hold a revision"):
        read_para_copy(root)
    (root / "REVISION").unlink()
    elsewhere = tmp_path / "hostname"
    elsewhere.write_text("somewhere", "utf-8")
    (root / "REVISION").symlink_to(elsewhere)
    with pytest.raises(ParaCopyError, match="is a link"):
        read_para_copy(root)


def test_a_hugging_face_snapshot_reads_through_its_blob_links(tmp_path: Path) -> None:
    """As the hub's download leaves it: every file a link into `../../blobs`."""
    repo = tmp_path / "datasets--x--libero-para"
    snapshot = repo / "snapshots" / REVISION
    make_para_copy(tmp_path / "plain", goal_tasks=(0, 1))
    (repo / "blobs").mkdir(parents=True)
    for source in sorted((tmp_path / "plain").rglob("*.bddl")):
        blob = repo / "blobs" / sha256_file(source)
        shutil.copyfile(source, blob)
        link = snapshot / source.relative_to(tmp_path / "plain")
        link.parent.mkdir(parents=True, exist_ok=True)
        link.symlink_to(os.path.relpath(blob, link.parent))
    outside = tmp_path / "outside.bddl"
    shutil.copyfile(tmp_path / "plain" / "action_synonym" / "goal_0.bddl", outside)
    (snapshot / "stray.bddl").symlink_to(outside)
    found = read_para_copy(snapshot)
    assert found.revision == REVISION
    assert len(found.entries) == 4
    refused = {r.para_path: r.reason for r in found.refused}
    assert refused["stray.bddl"].startswith("a link outside the copy's blob store")
    plain = read_para_copy(tmp_path / "plain")
    assert [(e.para_path, e.para_sha256) for e in found.entries] == [
        (e.para_path, e.para_sha256) for e in plain.entries
    ]


def test_a_run_pins_its_kept_catalog_whatever_the_copy_does_later(
    copy: tuple[Path, dict[str, str]], tmp_path: Path
) -> None:
    root, _ = copy
    kept_catalog = read_para_copy(root)
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    (run_dir / PARA_CATALOG_FILE).write_bytes(render_para(kept_catalog))
    manifest = {"protocol": {"catalog_sha256": "0" * 64}}
    (run_dir / "manifest.json").write_text(json.dumps(manifest), "utf-8")
    with pytest.raises(KeptCatalogError, match="does not hash to"):
        pin_run_catalog(run_dir)
    manifest["protocol"]["catalog_sha256"] = para_catalog_sha256(kept_catalog)
    (run_dir / "manifest.json").write_text(json.dumps(manifest), "utf-8")
    assert pin_run_catalog(run_dir) is not None
    first = catalog_entry("libero_para", 1)
    assert isinstance(first, ParaEntry)
    # A file added before it in path order would move every later index of a fresh read.
    (root / "action_synonym" / "aaa.bddl").write_text(paraphrased(2, "new"), "utf-8")
    assert catalog_entry("libero_para", 1) == first
    assert resolve_para("libero_para", 1, 0).instruction == first.instruction
    # A changed file of the copy is caught before a launch, resume or replay starts a
    # worker (workers never read the copy: it may not be on their node).
    (root / first.para_path).write_text(paraphrased(first.goal_task_index, "other"), "utf-8")
    LIBERO_PARA.check_local_copy([0])
    with pytest.raises(CatalogError, match="changed since"):
        LIBERO_PARA.check_local_copy([0, 1])


def test_the_declared_copy_is_private_to_actors(mailbox_root: Path, tmp_path: Path) -> None:
    """In the real sandbox: a copy under /usr, which every sandbox binds, is read by an
    actor while it is not declared, and hidden from it once it is."""
    root = Path("/usr/local/share") / f"mailroom-test-para-{uuid.uuid4().hex}"
    paths = make_para_copy(root)
    target = root / sorted(paths)[0]
    script = (
        f"t = {str(target)!r}\n"
        "try:\n    seen = open(t).read()\n"
        "except OSError as exc:\n    seen = exc.strerror\n"
        "open('seen.txt', 'w').write(seen)\n"
    )

    def seen_by_an_actor(name: str) -> str:
        (tmp_path / name).mkdir()
        launcher = sandbox_launcher(["{python}", "-c", script], mailbox_root, tmp_path / name)
        endpoint, _, _, _ = run_once_in_sandbox(launcher, mailbox_root, tmp_path / name)
        return (endpoint.scratch / "seen.txt").read_text()

    try:
        LIBERO_PARA.source.declare(None)
        assert seen_by_an_actor("undeclared") == target.read_text()
        LIBERO_PARA.declare_local_copy(root)
        assert root.resolve() in evaluator_paths()
        assert seen_by_an_actor("declared") == "No such file or directory"
    finally:
        shutil.rmtree(root)
        LIBERO_PARA.source.declare(None)


def test_the_catalog_hash_pins_the_contents_not_the_place(
    copy: tuple[Path, dict[str, str]], tmp_path: Path
) -> None:
    root, _ = copy
    first = para_catalog_sha256(read_para_copy(root))
    moved = tmp_path / "elsewhere"
    shutil.copytree(root, moved)
    assert para_catalog_sha256(read_para_copy(moved)) == first
    (moved / "REVISION").write_text("another\n", "utf-8")
    assert para_catalog_sha256(read_para_copy(moved)) != first
    (moved / "REVISION").write_text(REVISION, "utf-8")
    (moved / "action_synonym" / "goal_1.bddl").write_text(paraphrased(1, "other words"), "utf-8")
    assert para_catalog_sha256(read_para_copy(moved)) != first


def test_a_hugging_face_snapshot_folder_names_its_revision(tmp_path: Path) -> None:
    snapshot = tmp_path / "datasets--x--libero-para" / "snapshots" / REVISION
    make_para_copy(snapshot, goal_tasks=(0,))
    (snapshot / "REVISION").unlink()
    assert read_para_copy(snapshot).revision == REVISION
    plain = tmp_path / "plain"
    make_para_copy(plain, goal_tasks=(0,))
    (plain / "REVISION").unlink()
    assert read_para_copy(plain).revision is None


def test_lookups_need_a_declared_copy(copy: tuple[Path, dict[str, str]]) -> None:
    entry = catalog_entry("libero_para", 0)
    assert entry.benchmark == "libero_para"
    with pytest.raises(TaskIndexError, match="6 runnable paraphrases"):
        catalog_entry("libero_para", 6)
    LIBERO_PARA.source.declare(None)
    with pytest.raises(ParaCopyError, match="no LIBERO-Para copy is declared"):
        catalog_entry("libero_para", 0)
    with pytest.raises(ParaCopyError, match="not a directory"):
        read_para_copy(Path("/nonexistent-para-copy"))


def test_plans_select_by_cell_and_goal_task(copy: tuple[Path, dict[str, str]]) -> None:
    fast = build_plan("fast", suite="libero_para")
    assert fast.schema_ == PLAN_SCHEMA and fast.benchmark == "libero_para"
    assert fast.catalog_sha256 == para_catalog_sha256(LIBERO_PARA.source.catalog())
    picked = [LIBERO_PARA.source.catalog().entry(c.task_index) for c in fast.cases]
    assert [e.cell for e in picked] == ["action_synonym", "object_descriptive"]
    assert REVISION in fast.description
    cell = build_plan("task_coverage", suite="libero_para", cell="object_descriptive")
    assert [c.task_index for c in cell.cases] == [3, 4, 5]
    goal = build_plan("task_coverage", suite="libero_para", task_ids=[1])
    catalog = LIBERO_PARA.source.catalog()
    assert [catalog.entry(c.task_index).goal_task_index for c in goal.cases] == [1, 1]
    both = build_plan("task_coverage", suite="libero_para", task_ids=[2], cell="action_synonym")
    assert [c.task_index for c in both.cases] == [2]
    canonical = build_plan("canonical", suite="libero_para", task_ids=[0])
    assert canonical.canonical_protocol and len(canonical.cases) == 2 * 50
    assert {c.seed for c in canonical.cases} == {7}
    assert [c.init_state_index for c in canonical.cases[:4]] == [0, 0, 1, 1]
    with pytest.raises(PlanOptionError, match="needs a cell or Goal task ids"):
        build_plan("task_coverage", suite="libero_para")
    with pytest.raises(PlanOptionError, match="no runnable paraphrase"):
        build_plan("task_coverage", suite="libero_para", task_ids=[9])
    with pytest.raises(PlanOptionError, match="covers standard LIBERO"):
        build_plan("development", suite="libero_para")
    with pytest.raises(PlanOptionError, match="a cell selects LIBERO-Para"):
        build_plan("fast", suite="libero_10", cell="action_synonym")
    with pytest.raises(PlanOptionError, match="a category selects LIBERO-Plus"):
        build_plan("fast", suite="libero_para", category="camera")


def test_a_plan_is_refused_when_the_copy_changed(
    copy: tuple[Path, dict[str, str]], tmp_path: Path
) -> None:
    root, _ = copy
    plan = build_plan("task_coverage", suite="libero_para", cell="action_synonym")
    path = write_plan(plan, tmp_path / "para.json")
    assert load_plan(path) == plan
    (root / "action_synonym" / "goal_1.bddl").write_text(paraphrased(1, "changed"), "utf-8")
    LIBERO_PARA.source.reread()
    with pytest.raises(PlanCatalogMismatchError, match="rebuild the plan"):
        load_plan(path)
    LIBERO_PARA.source.declare(None)
    with pytest.raises(PlanCatalogMismatchError, match="no LIBERO-Para copy is declared"):
        load_plan(path)


def _run(*args: str) -> subprocess.CompletedProcess[str]:
    """The CLI with no LIBERO-Para copy declared by the environment."""
    return run_cli(*args, env={k: v for k, v in os.environ.items() if k != PARA_DIR_VARIABLE})


def test_the_cli_catalogues_a_copy_and_plans_from_it(
    copy: tuple[Path, dict[str, str]], tmp_path: Path
) -> None:
    root, _ = copy
    listed = _run("catalog", "--para-dir", str(root), "--json")
    assert listed.returncode == 0, listed.stderr
    document = json.loads(listed.stdout)
    assert document["catalog_sha256"] == para_catalog_sha256(read_para_copy(root))
    assert len(document["entries"]) == 6 and len(document["refused"]) == 3
    shown = _run("catalog", "--para-dir", str(root))
    assert shown.returncode == 0
    assert "3 files refused" in shown.stderr and "broken/moved_scene.bddl" in shown.stderr
    out = tmp_path / "cli.json"
    made = _run(
        "plan", "--kind", "task_coverage", "--suite", "libero_para", "--cell", "action_synonym",
        "--para-dir", str(root), "--out", str(out), "--json",
    )  # fmt: skip
    assert made.returncode == 0, made.stderr
    assert len(json.loads(made.stdout)["cases"]) == 3
    undeclared = _run("plan", "--kind", "fast", "--suite", "libero_para", "--out", str(out))
    assert undeclared.returncode == 2
    assert "no LIBERO-Para copy is declared" in undeclared.stderr
    assert "Traceback" not in undeclared.stderr
    mixed = _run("catalog", "--para-dir", str(root), "--suite", "libero_10")
    assert mixed.returncode == 2 and "--para-dir takes no" in mixed.stderr


def test_a_copy_named_by_the_environment_is_read_where_the_option_is_not_given(
    copy: tuple[Path, dict[str, str]], tmp_path: Path
) -> None:
    """`MAILROOM_PARA_DIR` stands for `--para-dir` (read, never written): a plan is made
    from that copy, while `catalog` still shows the suite it is asked for."""
    root, _ = copy
    env = {**os.environ, PARA_DIR_VARIABLE: str(root)}
    out = tmp_path / "from-env.json"
    made = run_cli(
        *("plan", "--kind", "fast", "--suite", "libero_para", "--out", str(out)), env=env
    )
    assert made.returncode == 0, made.stderr
    assert json.loads(out.read_text("utf-8"))["benchmark"] == "libero_para"
    shown = run_cli("catalog", "--suite", "libero_10", "--json", env=env)
    assert shown.returncode == 0, shown.stderr
    assert {e["suite"] for e in json.loads(shown.stdout)["entries"]} == {"libero_10"}


def test_without_a_copy_nothing_changes() -> None:
    """The standard catalog and plans neither read nor need a LIBERO-Para copy."""
    LIBERO_PARA.source.declare(None)
    assert build_plan("development").schema_ == "mailroom.plan/v3"
    assert build_plan("development").catalog_sha256 == catalog_sha256()
    listed = _run("catalog", "--json")
    assert listed.returncode == 0
    assert {e["benchmark"] for e in json.loads(listed.stdout)["entries"]} == {
        "libero",
        "libero_pro",
    }
