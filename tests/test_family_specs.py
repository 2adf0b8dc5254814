"""What a family's actors send and see is the family's declaration: the built-in families
declare LIBERO's, which mailbox protocol v1 carries; a family whose shape v1 cannot carry
is refused when it is registered, each problem named."""

from __future__ import annotations

from dataclasses import dataclass, replace

import pytest
from mailroom.benchmarks.libero.family import LIBERO
from mailroom.benchmarks.libero.specs import LIBERO_ACTION, LIBERO_OBSERVATION
from mailroom.orchestrator.families.registry import (
    DEFAULT_BENCHMARK,
    FamilyShapeError,
    _load,
    families,
    family,
)
from mailroom.orchestrator.sim.fake import FAKE_OBSERVATION
from mailroom.orchestrator.sim.specs import ActionSpec, ObservationSpec, protocol_v1_problems


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

    def __getattr__(self, name: str) -> object:
        return getattr(LIBERO, name)


def test_a_family_of_a_shape_v1_cannot_carry_is_refused_with_each_problem() -> None:
    four = replace(LIBERO_ACTION, layout=("x", "y", "z", "grip"), low=0.0, controller="JOINT")
    blind = replace(LIBERO_OBSERVATION, cameras=())
    with pytest.raises(FamilyShapeError) as refused:
        _load(_Reshaped(four, blind), "libero")
    said = str(refused.value)
    assert "mailbox protocol v1 cannot carry" in said
    for problem in ("an action of 4 numbers", "bounds [0.0, 1.0]", "'JOINT'", "no camera"):
        assert problem in said
    # One camera, another size and rate: v1 carries it.
    one = replace(LIBERO_OBSERVATION, cameras=("overhead",), image_size=64)
    assert _load(_Reshaped(replace(LIBERO_ACTION, control_hz=10), one), "libero")


def test_camera_names_must_be_words_an_image_file_name_can_hold() -> None:
    odd = replace(LIBERO_OBSERVATION, cameras=("Top View", "top view"))
    assert any("camera names" in p for p in protocol_v1_problems(LIBERO_ACTION, odd))
