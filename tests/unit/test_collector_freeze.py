"""settle_heap: survivors are frozen, and what was frozen is still collected once garbage."""

from __future__ import annotations

import gc
import weakref
from collections.abc import Iterator

import pytest
from mailroom.orchestrator.episode import collector_freeze
from mailroom.orchestrator.episode.collector_freeze import live_loops, settle_heap, thaw_heap


class Node:
    def __init__(self) -> None:
        self.partner: Node | None = None


def _cycle() -> tuple[Node, weakref.ref[Node]]:
    a, b = Node(), Node()
    a.partner, b.partner = b, a
    return a, weakref.ref(a)


@pytest.fixture(autouse=True)
def _unfrozen() -> Iterator[None]:
    yield
    while live_loops():
        thaw_heap()
    assert gc.get_freeze_count() == 0


def test_survivors_are_frozen_and_garbage_is_collected_first() -> None:
    kept, kept_ref = _cycle()
    dropped, dropped_ref = _cycle()
    del dropped
    settle_heap()
    assert dropped_ref() is None
    assert kept_ref() is kept
    assert gc.get_freeze_count() > 0
    # A frozen object is outside every generation: a full collection does not visit it.
    assert not any(obj is kept for obj in gc.get_objects())


def test_a_frozen_cycle_that_becomes_garbage_is_collected_by_the_next_full_settle(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # The simulator of the previous task is frozen with the rest; once it is replaced
    # it must still be collected, never kept for good.
    old_simulator, ref = _cycle()
    settle_heap()
    del old_simulator
    gc.collect()
    assert ref() is not None  # frozen: a plain collection leaves it
    # Another loop starts soon after, while the first is live: no full collection.
    settle_heap()
    assert ref() is not None
    # Once the interval has passed, the next start collects in full.
    monkeypatch.setattr(collector_freeze, "FULL_COLLECTION_INTERVAL_S", 0.0)
    settle_heap()
    assert ref() is None


def test_a_start_with_no_other_loop_live_always_collects_in_full() -> None:
    settle_heap()
    thaw_heap()
    dropped, ref = _cycle()
    gc.freeze()  # as if frozen by a loop that has ended since
    del dropped
    settle_heap()  # no loop is live: a full collection, however recent the last
    assert ref() is None


def test_thawing_lets_an_ordinary_collection_take_what_was_frozen() -> None:
    # After a policy loop the heap is thawed: a simulator closed or replaced then must
    # be freed by the collector's own passes, without waiting for another settle.
    replaced, ref = _cycle()
    settle_heap()
    thaw_heap()
    assert gc.get_freeze_count() == 0
    del replaced
    gc.collect()
    assert ref() is None


def test_the_heap_stays_frozen_until_the_last_live_loop_ends() -> None:
    # A worker with two live episodes: the first to end must not thaw the other's loop.
    settle_heap()
    settle_heap()
    assert live_loops() == 2
    thaw_heap()
    assert gc.get_freeze_count() > 0
    thaw_heap()
    assert live_loops() == 0 and gc.get_freeze_count() == 0
    thaw_heap()  # an extra thaw never goes below zero
    assert live_loops() == 0
