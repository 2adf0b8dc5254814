"""Keep the garbage collector's full passes out of the decision loop.

A simulator process holds ~190,000 long-lived Python objects (robosuite, MuJoCo
bindings, LIBERO's scene). A full collection walks all of them: ~70-120 ms measured
here, which struck mid-episode while an actor waited. Before each policy loop the heap
is collected once and the survivors are frozen (`gc.freeze`): later collections look
only at objects made since.

Frozen objects are never collected, even once unreachable, so the heap is thawed
before each episode's start: a simulator that the start replaces (a new task, or the
fresh copy a reset makes) is collected as it would be without freezing.
"""

from __future__ import annotations

import gc


def thaw_heap() -> None:
    """Before an episode's start: what the last episode froze may become garbage now."""
    gc.unfreeze()


def settle_heap() -> None:
    """After the start: collect everything unreachable, then freeze the survivors."""
    gc.unfreeze()
    gc.collect()
    gc.freeze()
