"""Keep the garbage collector's full passes out of the decision loop.

A simulator process holds ~190,000 long-lived Python objects (robosuite, MuJoCo
bindings, LIBERO's scene). A full collection walks all of them: ~70-120 ms measured
here, which struck mid-episode while an actor waited. Before each policy loop the heap
is collected once and the survivors are frozen (`gc.freeze`): later collections look
only at objects made since. The previous freeze is undone first, so a simulator that
was replaced since is still collected, never kept for good.
"""

from __future__ import annotations

import gc


def settle_heap() -> None:
    """Collect everything unreachable, then exempt the survivors from later passes."""
    gc.unfreeze()
    gc.collect()
    gc.freeze()
