"""Keep the garbage collector's full passes out of the decision loop.

A simulator process holds ~190,000 long-lived Python objects (robosuite, MuJoCo
bindings, LIBERO's scene). A full collection walks all of them: ~70-120 ms measured
here, which struck mid-episode while an actor waited. Before each policy loop the heap
is collected once and the survivors are frozen (`gc.freeze`): collections during the
loop look only at objects made since.

Frozen objects are never collected, even once unreachable, so the freeze lasts for the
policy loop only: the runner thaws the heap when the loop ends, and a simulator that a
later start replaces (a new task, or the fresh copy a reset makes) or that is closed
is collected as it would be without freezing.
"""

from __future__ import annotations

import gc


def settle_heap() -> None:
    """Before a policy loop: collect everything unreachable, then freeze the survivors."""
    gc.unfreeze()
    gc.collect()
    gc.freeze()


def thaw_heap() -> None:
    """After a policy loop: everything is collectable again."""
    gc.unfreeze()
