"""The runner side depends on the `Simulator` Protocol, never on the LIBERO adapter.

Which rooms may import the adapter is a contract of pyproject.toml's [tool.importlinter]
(`simulator-free`), checked by lint-imports (tests/contract/test_layers.py).
"""

from __future__ import annotations

import numpy as np
from mailroom.benchmarks.libero.adapter import LiberoAdapter, open_libero
from mailroom.benchmarks.libero.specs import LIBERO_OBSERVATION
from mailroom.orchestrator.sim.base import Simulator, SimulatorFactory
from mailroom.orchestrator.sim.fake import FakeSimulator, fake_identity

SETTLING_CONTROLS = LIBERO_OBSERVATION.settling_controls

# Statically checked by mypy: both adapters are Simulators, the factory a SimulatorFactory.
FACTORY: SimulatorFactory = open_libero


def _as_simulator(simulator: Simulator) -> Simulator:
    return simulator


def test_the_libero_adapter_builds_nothing_until_an_episode_starts() -> None:
    adapter = LiberoAdapter(control_cap=5)
    real = _as_simulator(adapter)
    real.set_control_cap(9)
    assert real.control_cap == 9 and adapter.envs_built == 0
    real.close()


def test_the_fake_is_deterministic_and_succeeds_only_where_told() -> None:
    identity = fake_identity("libero_goal", 3)
    runs = []
    for _ in range(2):
        fake = _as_simulator(FakeSimulator(control_cap=10, succeed_at=3))
        start = fake.start_episode(identity, 2, seed=7)
        assert start.settling_controls == SETTLING_CONTROLS and not start.success_during_settling
        outcomes = [fake.step([0.0] * 7, observe=i == 3) for i in range(4)]
        assert [o.success for o in outcomes] == [False, False, True, True]
        assert [o.capture is not None for o in outcomes] == [False, False, False, True]
        runs.append((start, outcomes[3]))
    (a_start, a_last), (b_start, b_last) = runs
    assert a_start.state_sha256 == b_start.state_sha256
    assert a_last.capture is not None and b_last.capture is not None
    for camera, image in a_last.capture.images.items():
        assert image.shape == (256, 256, 3) and image.dtype == np.uint8
        assert np.array_equal(image, b_last.capture.images[camera])
        assert not np.array_equal(image, a_start.capture.images[camera])
    never = FakeSimulator(control_cap=10)
    never.start_episode(identity, 0, seed=7)
    assert not any(never.step([0.0] * 7, observe=False).success for _ in range(10))


def test_the_fake_records_frames_when_asked() -> None:
    fake = FakeSimulator(control_cap=10)
    fake.record_frames = True
    fake.start_episode(fake.resolve_task("libero_10", 0, 0), 0, seed=1)
    outcome = fake.step([0.0] * 7, observe=False)
    assert outcome.capture is None and outcome.frames is not None
    assert set(outcome.frames) == {"agentview", "robot0_eye_in_hand"}
