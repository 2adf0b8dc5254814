"""Keep the garbage collector's full passes out of the decision loop.

A simulator process holds ~190,000 long-lived Python objects (robosuite, MuJoCo
bindings, LIBERO's scene). A full collection walks all of them: ~70-120 ms measured
here, which struck mid-episode while an actor waited. Before each policy loop the heap
is collected once and the survivors are frozen (`gc.freeze`): collections during the
loop look only at objects made since.

Frozen objects are never collected, even once unreachable, so the freeze lasts for the
policy loops only: the runner thaws the heap when its loop ends, and a simulator that a
later start replaces (a new task, or the fresh copy a reset makes) or that is closed
is collected as it would be without freezing. A worker with several live episodes runs
several loops at once: the heap is thawed when the last of them ends (each new loop
freezes again, taking in what its start built). A full collection walks every object
of every live episode, holding the interpreter lock while the worker's serving thread
waits: with hundreds of live episodes, one per start would stall serving again and
again. While other loops are live, a start collects in full only if the last full
collection is `FULL_COLLECTION_INTERVAL_S` old; otherwise it freezes what it built.
Garbage frozen meanwhile (a replaced simulator's cycles) waits for that next full
collection.
"""

from __future__ import annotations

import gc
import threading
import time

FULL_COLLECTION_INTERVAL_S = 30.0
_live_loops = 0
_last_full = -float("inf")
_lock = threading.Lock()  # episodes start on one thread and end on another


def settle_heap() -> None:
    """Before a policy loop: collect everything unreachable, then freeze the survivors
    (while other loops are live, at most once per `FULL_COLLECTION_INTERVAL_S`)."""
    global _live_loops, _last_full
    with _lock:
        now = time.monotonic()
        if _live_loops == 0 or now - _last_full >= FULL_COLLECTION_INTERVAL_S:
            gc.unfreeze()
            gc.collect()
            _last_full = now
        _live_loops += 1
        gc.freeze()


def thaw_heap() -> None:
    """After a policy loop: everything is collectable again once no loop is live."""
    global _live_loops
    with _lock:
        _live_loops = max(0, _live_loops - 1)
        if _live_loops == 0:
            gc.unfreeze()


def live_loops() -> int:
    """Policy loops settled and not yet thawed in this process."""
    return _live_loops
