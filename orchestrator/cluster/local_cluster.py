"""A Ray cluster of several node processes on this machine (Ray's own cluster utilities),
each with its own `mailroom_slot`s: what the bench's cluster section and the tests run
the Ray executor on."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from typing import TYPE_CHECKING

from mailroom.orchestrator.cluster.executor import SLOT_RESOURCE

if TYPE_CHECKING:
    from ray.cluster_utils import Cluster

# Ray starts its worker processes at niceness 15 unless its raylet is told otherwise.
# On a machine that also runs other work (the local executor a bench compares against,
# the tests beside these), its workers, which run the simulator and the mailbox, would
# then get a few percent of a busy core and take ten times as long.
WORKER_NICENESS = ("RAY_worker_niceness", "0")


@contextlib.contextmanager
def local_cluster(nodes: int, slots_per_node: int, *, connect: bool = False) -> Iterator[Cluster]:
    """A head node and `nodes - 1` more, each with one CPU and `slots_per_node` slots;
    with `connect`, this process is the cluster's driver until the end. Whoever drove
    it is disconnected when it shuts down."""
    import ray
    from ray.cluster_utils import Cluster

    with _nodes_environment():
        made = Cluster(
            initialize_head=True,
            head_node_args={"num_cpus": 1, "resources": {SLOT_RESOURCE: slots_per_node}},
        )
    try:
        with _nodes_environment():
            for _ in range(nodes - 1):
                made.add_node(num_cpus=1, resources={SLOT_RESOURCE: slots_per_node})
        made.wait_for_nodes()
        if connect:
            ray.init(address=made.address, log_to_driver=False)
        yield made
    finally:
        ray.shutdown()
        made.shutdown()  # type: ignore[no-untyped-call]


@contextlib.contextmanager
def _nodes_environment() -> Iterator[None]:
    """This process's environment while it starts node processes, which inherit it."""
    name, value = WORKER_NICENESS
    before = os.environ.get(name)
    os.environ[name] = value
    try:
        yield
    finally:
        if before is None:
            os.environ.pop(name, None)
        else:
            os.environ[name] = before
