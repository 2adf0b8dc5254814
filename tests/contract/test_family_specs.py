"""What a family's actors send and see is the family's declaration: the built-in families
declare LIBERO's, which mailbox protocol v1 carries; a family of another shape speaks
protocol v2 and must guide its actors; a family neither can carry is refused when it is
registered, each problem named."""

from __future__ import annotations

from dataclasses import dataclass, replace

import pytest
from mailroom.benchmarks.libero.family import LIBERO
from mailroom.benchmarks.libero.specs import LIBERO_ACTION, LIBERO_OBSERVATION
from mailroom.mailbox.protocol import PROTOCOL_V1, PROTOCOL_V2
from mailroom.orchestrator.families.registry import (
    DEFAULT_BENCHMARK,
    FamilyShapeError,
    _load,
    families,
    family,
)
from mailroom.orchestrator.sim.fake import FAKE_OBSERVATION
from mailroom.orchestrator.sim.specs import (
    ActionSpec,
    ObservationSpec,
    protocol_for,
    protocol_v1_problems,
    protocol_v2_problems,
)


def test_the_built_in_families_declare_libero_s_shape_which_v1_carries() -> None:
    assert LIBERO_ACTION.dimension == 7
    assert protocol_v1_problems(LIBERO_ACTION, LIBERO_OBSERVATION) == []
    for registered in families().values():
        if registered.name.startswith("libero"):
            assert registered.action_spec == LIBERO_ACTION
            assert registered.observation_spec == LIBERO_OBSERVATION


def test_the_fake_delivers_what_the_default_family_declares() -> None:
    assert family(DEFAULT_BENCHMARK).observation_spec == FAKE_OBSERVATION


@dataclass
class _Reshaped:
    """LIBERO's family with another action and observation spec."""

    action_spec: ActionSpec
    observation_spec: ObservationSpec
    actor_guide: str | None = None

    def __getattr__(self, name: str) -> object:
        return getattr(LIBERO, name)


def test_another_action_shape_speaks_protocol_v2_with_a_guide() -> None:
    four = replace(LIBERO_ACTION, layout=("x", "y", "z", "grip"), low=0.0, controller="JOINT")
    assert protocol_v1_problems(four, LIBERO_OBSERVATION) != []
    assert protocol_for(four, LIBERO_OBSERVATION) == PROTOCOL_V2
    assert protocol_for(LIBERO_ACTION, LIBERO_OBSERVATION) == PROTOCOL_V1
    guided = _Reshaped(four, LIBERO_OBSERVATION, actor_guide="x, y, z: joint velocities")
    assert _load(guided, "libero").actor_guide == guided.actor_guide
    # Without a guide its actors would not know what a component does: refused.
    with pytest.raises(FamilyShapeError) as refused:
        _load(_Reshaped(four, LIBERO_OBSERVATION), "libero")
    assert "no actor guide" in str(refused.value)


def test_a_family_of_a_shape_no_protocol_carries_is_refused_with_each_problem() -> None:
    wide = ActionSpec(
        layout=tuple(f"j{i}" for i in range(65)),
        low=1.0,
        high=1.0,
        controller="joint velocity",
        control_hz=10,
    )
    blind = replace(LIBERO_OBSERVATION, cameras=(), proprio=(("wrist_force", 6),))
    with pytest.raises(FamilyShapeError) as refused:
        _load(_Reshaped(wide, blind, actor_guide="guide"), "libero")
    said = str(refused.value)
    assert "mailbox protocol cannot carry" in said
    for problem in (
        "an action of 65 numbers",
        "bounds [1.0, 1.0]",
        "'joint velocity'",
        "no camera",
        "wrist_force",
    ):
        assert problem in said, problem
    twice = replace(LIBERO_ACTION, layout=("x", "x", "z", "g", "a", "b", "c"), low=0.0)
    assert any("component names" in p for p in protocol_v2_problems(twice, LIBERO_OBSERVATION))
    # One camera, another size and rate: v1 carries it.
    one = replace(LIBERO_OBSERVATION, cameras=("overhead",), image_size=64)
    assert _load(_Reshaped(replace(LIBERO_ACTION, control_hz=10), one), "libero")


def test_camera_names_must_be_words_an_image_file_name_can_hold() -> None:
    odd = replace(LIBERO_OBSERVATION, cameras=("Top View", "top view"))
    assert any("camera names" in p for p in protocol_v1_problems(LIBERO_ACTION, odd))
