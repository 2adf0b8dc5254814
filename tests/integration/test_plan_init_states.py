"""`mailroom plan --kind task_coverage --init-states ...`: each selected task from each of
several released initial states, for every family that plans task coverage.

Without the option (or with state 0 alone) a plan is byte-for-byte the one `mailroom plan`
wrote before the option existed: the files in `tests/support/data/plans_before_init_states/` were
written by the command at 75a9600, before any of this code, and are compared byte for
byte. No test here builds a simulator.
"""

from __future__ import annotations

import importlib
import os
from collections.abc import Iterator
from pathlib import Path

import pytest
from conftest import REPO, assert_usage_error, run_cli
from mailroom.benchmarks.libero_para.family import LIBERO_PARA
from mailroom.benchmarks.libero_para.local_copy import (
    PARA_DIR_VARIABLE,
)
from mailroom.benchmarks.libero_plus.catalog import load_plus_catalog
from mailroom.orchestrator.catalog.cases import Case
from mailroom.orchestrator.catalog.plan_states import (
    ONCE_STATE_PHRASE,
    checked_states,
    format_states,
    with_states,
)
from mailroom.orchestrator.catalog.plans import (
    ONCE_NOTE,
    Plan,
    PlanCase,
    PlanOptionError,
    Selection,
    render_plan,
)
from mailroom.orchestrator.families import plans as family_plans
from mailroom.orchestrator.families import registry
from mailroom.orchestrator.families.plans import build_plan, load_plan
from para_copy import make_para_copy

BEFORE = REPO / "tests" / "support" / "data" / "plans_before_init_states"
# Each file there, and the `mailroom plan` options that wrote it.
GOLDEN = {
    "libero_10_t0.json": ("task_coverage", "--suite", "libero_10", "--task-ids", "0"),
    "libero_90_t89_0_45.json": (
        *("task_coverage", "--suite", "libero_90", "--task-ids", "89,0,45"),
    ),
    "libero_goal_swap_t3.json": ("task_coverage", "--suite", "libero_goal_swap", "--task-ids", "3"),
    "libero_plus_10_t289_1946.json": (
        *("task_coverage", "--suite", "libero_plus_10", "--task-ids", "289,1946"),
    ),
    "fast.json": ("fast",),
}
PARA_GOLDEN = "libero_para_goal_t1_0.json"
PARA_OPTIONS = ("task_coverage", "--suite", "libero_para", "--task-ids", "1,0")
PLUS_STATES_50 = 289  # libero_plus_10: a robot_init task on its base task's 50 states
PLUS_STATE_OF_ITS_OWN = 1946  # libero_plus_10: a layout task, one state of its own


def _states(plan: Plan) -> list[tuple[int, int]]:
    return [(c.task_index, c.init_state_index) for c in plan.cases]


def _case_ids(plan: Plan) -> list[str]:
    return [c.to_case().case_id for c in plan.cases]


def _round_trips(plan: Plan) -> bool:
    """The plan's bytes load back as the same plan, checked against the installed catalog."""
    return family_plans.parse_plan(render_plan(plan)) == plan


def _no_para_env() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if k != PARA_DIR_VARIABLE}


@pytest.fixture
def para_copy(tmp_path: Path) -> Iterator[Path]:
    root = tmp_path / "LIBERO-Para"
    make_para_copy(root)
    LIBERO_PARA.declare_local_copy(root)
    yield root
    LIBERO_PARA.source.declare(None)


# Without the option: today's plans, byte for byte.


@pytest.mark.parametrize("name", sorted(GOLDEN))
def test_without_the_option_the_plan_is_the_one_written_before_it(
    tmp_path: Path, name: str
) -> None:
    golden = (BEFORE / name).read_bytes()
    out = tmp_path / name
    made = run_cli("plan", "--kind", *GOLDEN[name], "--out", str(out))
    assert made.returncode == 0, made.stderr
    assert out.read_bytes() == golden
    if GOLDEN[name][0] == "task_coverage":
        zero = tmp_path / f"zero-{name}"
        made = run_cli("plan", "--kind", *GOLDEN[name], "--init-states", "0", "--out", str(zero))
        assert made.returncode == 0, made.stderr
        assert zero.read_bytes() == golden


def test_a_para_plan_without_the_option_is_the_one_written_before_it(
    para_copy: Path, tmp_path: Path
) -> None:
    golden = (BEFORE / PARA_GOLDEN).read_bytes()
    for n, extra in enumerate(((), ("--init-states", "0"))):
        out = tmp_path / f"para{n}.json"
        made = run_cli(
            *("plan", "--kind", *PARA_OPTIONS, *extra, "--para-dir", str(para_copy)),
            *("--out", str(out)),
            env=_no_para_env(),
        )
        assert made.returncode == 0, made.stderr
        assert out.read_bytes() == golden


# Several states: the cases, their order and ids, the hash.


def test_each_task_from_each_state_interleaved_as_the_canonical_protocol(tmp_path: Path) -> None:
    out = tmp_path / "states.json"
    made = run_cli(
        *("plan", "--kind", "task_coverage", "--suite", "libero_10", "--task-ids", "4,0"),
        *("--init-states", "0,1,2,3", "--out", str(out)),
    )
    assert made.returncode == 0, made.stderr
    plan = load_plan(out)  # checked against the installed catalog, states included
    assert _states(plan) == [(t, s) for s in range(4) for t in (4, 0)]
    assert {(c.seed, c.task_order_index, c.suite) for c in plan.cases} == {
        (20260907, 0, "libero_10")
    }
    ids = _case_ids(plan)
    assert len(set(ids)) == len(ids) == 8
    assert ids[:3] == [
        "libero_10-t004-i00-o0-s20260907",
        "libero_10-t000-i00-o0-s20260907",
        "libero_10-t004-i01-o0-s20260907",
    ]
    assert plan.label == (
        "task coverage: libero_10 tasks 4,0, each once from each of released initial states 0-3"
    )
    assert ONCE_STATE_PHRASE not in plan.description
    assert "each once from each of released initial states 0-3 in turn" in plan.description
    assert "8 cases" in made.stderr


def test_the_hash_follows_the_case_list_only() -> None:
    one = build_plan("task_coverage", "libero_10", [0], init_states=[0, 1, 2, 3])
    assert build_plan("task_coverage", "libero_10", [0], init_states=[3, 1, 0, 2]) == one
    assert render_plan(
        build_plan("task_coverage", "libero_10", [0], init_states=[2, 0, 3, 1])
    ) == render_plan(one)
    other = build_plan("task_coverage", "libero_10", [0], init_states=[0, 1, 2, 4])
    assert other.plan_sha256 != one.plan_sha256
    default = build_plan("task_coverage", "libero_10", [0])
    assert build_plan("task_coverage", "libero_10", [0], init_states=[0]) == default
    assert default.plan_sha256 != one.plan_sha256
    assert _states(build_plan("task_coverage", "libero_10", [0], init_states=[7])) == [(0, 7)]


def test_every_state_of_a_task_and_a_long_list_still_fit_the_label() -> None:
    every = build_plan("task_coverage", "libero_90", [89], init_states=list(range(50)))
    assert _states(every) == [(89, s) for s in range(50)]
    assert every.label.endswith("released initial states 0-49")
    scattered = list(range(0, 50, 2))
    tasks = list(range(40))
    many = build_plan("task_coverage", "libero_90", tasks, init_states=scattered)
    assert _states(many) == [(t, s) for s in scattered for t in tasks]
    assert many.label.endswith("from each of 25 released initial states")
    assert "released initial states 0,2,4,6," in many.description
    assert _round_trips(many)


def test_a_selection_too_long_to_label_is_a_usage_error(tmp_path: Path) -> None:
    """90 task ids make a label over the frozen 200 characters, with or without states."""
    out = tmp_path / "plan.json"
    ids = ",".join(str(i) for i in range(90))
    for extra in ((), ("--init-states", "0,1")):
        proc = run_cli(
            *("plan", "--kind", "task_coverage", "--suite", "libero_90", "--task-ids", ids),
            *extra,
            *("--out", str(out)),
        )
        assert_usage_error(proc, "the selection makes no valid plan: label")
        assert not out.exists()


def test_libero_pro_suites() -> None:
    plan = build_plan("task_coverage", "libero_goal_swap", [3, 1], init_states=[0, 49])
    assert plan.benchmark == "libero_pro"
    assert _states(plan) == [(3, 0), (1, 0), (3, 49), (1, 49)]
    assert _round_trips(plan)


def test_libero_plus_tasks_on_released_states_and_layout_tasks_on_their_own() -> None:
    entries = load_plus_catalog()
    assert entries.entry("libero_plus_10", PLUS_STATES_50).n_init_states == 50
    assert entries.entry("libero_plus_10", PLUS_STATE_OF_ITS_OWN).n_init_states == 1
    plan = build_plan("task_coverage", "libero_plus_10", [PLUS_STATES_50], init_states=[0, 1])
    assert plan.benchmark == "libero_plus"
    assert _states(plan) == [(PLUS_STATES_50, 0), (PLUS_STATES_50, 1)]
    assert _round_trips(plan)
    with pytest.raises(PlanOptionError, match=r"task 1946 has 1 released initial state \(0\)"):
        build_plan(
            "task_coverage",
            "libero_plus_10",
            [PLUS_STATES_50, PLUS_STATE_OF_ITS_OWN],
            init_states=[0, 1],
        )
    layout = build_plan("task_coverage", "libero_plus_10", [PLUS_STATE_OF_ITS_OWN], init_states=[0])
    assert _states(layout) == [(PLUS_STATE_OF_ITS_OWN, 0)]
    by_category = build_plan(
        "task_coverage", "libero_plus_10", category="camera", init_states=[0, 1]
    )
    camera = len(load_plus_catalog().suite_entries("libero_plus_10", "camera"))
    assert len(by_category.cases) == 2 * camera
    with pytest.raises(PlanOptionError, match="1 released initial state"):
        build_plan("task_coverage", "libero_plus_10", category="layout", init_states=[0, 1])


def test_libero_para_paraphrases_on_their_goal_tasks_states(para_copy: Path) -> None:
    plan = build_plan("task_coverage", "libero_para", [1, 0], init_states=[0, 2])
    once = build_plan("task_coverage", "libero_para", [1, 0])
    paraphrases = [c.task_index for c in once.cases]
    assert _states(plan) == [(t, s) for s in (0, 2) for t in paraphrases]
    assert plan.benchmark == "libero_para" and _round_trips(plan)
    with pytest.raises(PlanOptionError, match=r"has 50 released initial states \(0-49\)"):
        build_plan("task_coverage", "libero_para", [0], init_states=[50])


def test_the_cli_plans_para_states(para_copy: Path, tmp_path: Path) -> None:
    out = tmp_path / "para.json"
    made = run_cli(
        *("plan", "--kind", *PARA_OPTIONS, "--init-states", "1,0", "--para-dir", str(para_copy)),
        *("--out", str(out)),
        env=_no_para_env(),
    )
    assert made.returncode == 0, made.stderr
    assert {c.init_state_index for c in load_plan(out).cases} == {0, 1}


def test_a_third_party_family_through_the_registry(monkeypatch: pytest.MonkeyPatch) -> None:
    """The toy family (tests/support/toy_family) knows nothing of the option: the registry reads
    its entries' released-state counts (3 each)."""
    monkeypatch.syspath_prepend(str(REPO / "tests" / "support" / "toy_family"))
    toy = importlib.import_module("mailroom_toy_family")  # not on mypy's path
    suite: str = toy.TOYWORLD.suite
    known = {**registry.families(), toy.TOYWORLD.name: toy.TOYWORLD}
    monkeypatch.setattr(registry, "families", lambda: known)
    monkeypatch.setattr(family_plans, "families", lambda: known)
    plan = build_plan("task_coverage", suite, [1, 0], init_states=[2, 1])
    assert plan.benchmark == "toyworld"
    assert _states(plan) == [(1, 1), (0, 1), (1, 2), (0, 2)]
    assert plan.label.endswith("each once from each of released initial states 1,2")
    assert "Each task from each of released initial states 1,2 in turn" in plan.description
    assert _round_trips(plan)
    with pytest.raises(PlanOptionError, match=r"has 3 released initial states \(0-2\)"):
        build_plan("task_coverage", suite, [0], init_states=[3])


def test_a_family_that_chooses_its_own_states_refuses() -> None:
    case = PlanCase(
        benchmark="libero",
        suite="libero_10",
        task_index=0,
        init_state_index=5,
        seed=1,
        task_order_index=0,
    )
    picked = Selection(label="l", description="d", cases=[case])
    with pytest.raises(PlanOptionError, match="Somebench task-coverage plans choose their own"):
        with_states(picked, [0, 1], lambda _case: 50, "Somebench")


# Refusals: a usage error, exit 2, nothing written.


@pytest.mark.parametrize(
    ("states", "message"),
    [
        ("0,1,1", "init states repeat 1"),
        ("2,0,2,0", "init states repeat 0,2"),
        ("-1", "names a negative state"),
        ("0,-3", "names a negative state"),
        ("x", "comma-separated list of released initial state indices"),
        ("", "comma-separated list of released initial state indices"),
        ("0,,1", "comma-separated list of released initial state indices"),
        ("1.5", "comma-separated list of released initial state indices"),
        ("+1", "comma-separated list of released initial state indices"),
        ("50", "libero_10 task 0 has 50 released initial states (0-49): init state 50 is out"),
        ("0,50,51", "init states 50,51 are out of its range"),
    ],
)
def test_bad_state_lists_are_usage_errors(tmp_path: Path, states: str, message: str) -> None:
    out = tmp_path / "plan.json"
    proc = run_cli(
        *("plan", "--kind", "task_coverage", "--suite", "libero_10", "--task-ids", "0"),
        *("--init-states", states, "--out", str(out)),
    )
    assert_usage_error(proc, message)
    assert not out.exists()


@pytest.mark.parametrize(
    "args",
    [
        ("fast",),
        ("development",),
        ("all",),
        ("canonical", "--suite", "libero_10"),
    ],
)
def test_other_kinds_take_no_states(tmp_path: Path, args: tuple[str, ...]) -> None:
    out = tmp_path / "plan.json"
    proc = run_cli("plan", "--kind", *args, "--init-states", "0,1", "--out", str(out))
    assert_usage_error(proc, f"plan kind '{args[0]}' takes no init states")
    assert not out.exists()


def test_a_plus_layout_task_has_no_state_to_choose(tmp_path: Path) -> None:
    out = tmp_path / "plan.json"
    proc = run_cli(
        *("plan", "--kind", "task_coverage", "--suite", "libero_plus_10"),
        *("--task-ids", str(PLUS_STATE_OF_ITS_OWN), "--init-states", "0,1", "--out", str(out)),
    )
    assert_usage_error(
        proc, "libero_plus_10 task 1946 has 1 released initial state (0): init state 1 is out"
    )
    assert not out.exists()


def test_a_refused_list_leaves_an_existing_plan_alone(tmp_path: Path) -> None:
    out = tmp_path / "plan.json"
    made = run_cli("plan", "--kind", "fast", "--out", str(out))
    assert made.returncode == 0, made.stderr
    before = out.read_bytes()
    proc = run_cli(
        *("plan", "--kind", "task_coverage", "--suite", "libero_10", "--task-ids", "0"),
        *("--init-states", "0,99", "--out", str(out), "--force"),
    )
    assert_usage_error(proc, "init state 99 is out of its range")
    assert out.read_bytes() == before


# The pieces.


def test_checked_states_and_their_format() -> None:
    assert checked_states([3, 0, 1]) == (0, 1, 3)
    for bad, message in (
        ([], "at least one"),
        ([0, -2], "state -2 is negative"),
        ([1, 1], "repeat 1"),
    ):
        with pytest.raises(PlanOptionError, match=message):
            checked_states(bad)
    assert format_states([0, 1, 2, 3, 7, 9, 10]) == "0-3,7,9,10"
    assert format_states([4]) == "4"
    assert ONCE_NOTE.startswith(ONCE_STATE_PHRASE)


def test_a_case_id_names_its_state() -> None:
    plan = build_plan("task_coverage", "libero_10", [0], init_states=[0, 12])
    assert [c.to_case() for c in plan.cases] == [
        Case(suite="libero_10", task_index=0, init_state_index=s, seed=20260907, benchmark="libero")
        for s in (0, 12)
    ]
    assert _case_ids(plan)[1] == "libero_10-t000-i12-o0-s20260907"
