"""A catalog entry made a task identity, its files checked against the catalog's hashes."""

from __future__ import annotations

from pathlib import Path

from mailroom.hashing import sha256_file
from mailroom.orchestrator.catalog.entries import CatalogEntry, CatalogError
from mailroom.orchestrator.sim.base import TaskIdentity


def checked_identity(
    entry: CatalogEntry,
    root: Path,
    *,
    task_order_index: int,
    distribution: str,
    perturbation: object | None = None,
) -> TaskIdentity:
    """The entry's BDDL and init-state files under `root` (the installed package of
    `distribution`) must hash as the catalog froze them: a file that differs means
    another package than the catalog's, refused, never silently used."""
    if task_order_index != 0:
        raise CatalogError("only task order index 0 (the package's own order) is catalogued")
    bddl = root / entry.bddl_path
    init_path = root / entry.init_states_path
    for path, expected in ((bddl, entry.bddl_sha256), (init_path, entry.init_states_sha256)):
        if not path.is_file() or sha256_file(path) != expected:
            raise CatalogError(
                f"{path} is missing or differs from the catalog: the installed "
                f"{distribution} is not the one the catalog was built from"
            )
    return TaskIdentity(
        benchmark=entry.benchmark,
        suite=entry.suite,
        task_index=entry.task_index,
        task_order_index=task_order_index,
        task_name=entry.task_name,
        instruction=entry.instruction,
        bddl_path=bddl,
        init_states_path=init_path,
        bddl_sha256=entry.bddl_sha256,
        init_states_sha256=entry.init_states_sha256,
        n_init_states=entry.n_init_states,
        perturbation=perturbation,
    )
