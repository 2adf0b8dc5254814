"""LIBERO-Para in the LIBERO adapter: a paraphrase runs its LIBERO-Goal task's scene.

The env is built from the installed Goal task's BDDL file, with its released states, and
the paraphrase's language is the instruction delivered; the paraphrase's own file in the
copy is checked against the catalog the plan pinned (it differs from the Goal file in its
language line alone, which the catalog proved when it matched it).
"""

from __future__ import annotations

import os

from mailroom.hashing import sha256_file
from mailroom.orchestrator.catalog.frozen import CatalogError
from mailroom.orchestrator.catalog.para import (
    PARA_DIR_VARIABLE,
    declared_para_dir,
    load_para_catalog,
)
from mailroom.orchestrator.sim.base import TaskIdentity


def resolve_para_task(
    suite: str, task_index: int, task_order_index: int, goal: TaskIdentity
) -> TaskIdentity:
    """`goal` is the paraphrased LIBERO-Goal task's identity, its files already checked."""
    entry = load_para_catalog().entry(task_index)
    # Without a declared copy, a replay reads the catalog the run kept (pinned by its
    # manifest): the scene is the Goal task's and the instruction the catalog's.
    declared = bool(os.environ.get(PARA_DIR_VARIABLE))
    copy = declared_para_dir() / entry.para_path if declared else None
    if copy is not None and (not copy.is_file() or sha256_file(copy) != entry.para_sha256):
        raise CatalogError(
            f"{copy} is missing or changed since the LIBERO-Para catalog was read: "
            "the copy is not the one the plan pinned"
        )
    return TaskIdentity(
        benchmark=entry.benchmark,
        suite=suite,
        task_index=task_index,
        task_order_index=task_order_index,
        task_name=entry.task_name,
        instruction=entry.instruction,
        bddl_path=goal.bddl_path,
        init_states_path=goal.init_states_path,
        bddl_sha256=goal.bddl_sha256,
        init_states_sha256=goal.init_states_sha256,
        n_init_states=goal.n_init_states,
    )
