"""The catalog a run keeps in its directory: written once, read and pinned one way.

A family whose catalog is made from something outside the installed package (LIBERO-Para:
a local copy) declares the file its runs keep it under (`BenchmarkFamily.kept_catalog_file`);
the first launch keeps the catalog there and the manifest records its hash. From then on
everything about the run resolves its cases against that kept catalog, whatever the copy
holds by then, and whether or not it is there at all:

- every command that reads a run (report, audit, replay, view, export, compare) pins the
  run's kept catalog through `pin_run_catalog`, so each names a case's group (a
  LIBERO-Para cell) the same way;
- the work a launch hands its executor carries the kept catalog as data
  (`LaunchConfig.kept`), and each worker pins it before it resolves a case: a Ray worker
  on another node gets it inside its work, never through the driver's environment; a
  replay's worker processes get it the same way.

Families whose catalog is frozen in the installed package (LIBERO, LIBERO-PRO,
LIBERO-Plus) keep nothing.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

from mailroom.mailbox.publish import publish_bytes
from mailroom.orchestrator.catalog.entries import CatalogError
from mailroom.orchestrator.families.registry import families, family
from mailroom.orchestrator.records.layout import MANIFEST_FILE


class KeptCatalogError(CatalogError, ValueError):
    """A run's kept catalog does not hash to what its manifest records, or cannot be read."""


@dataclass(frozen=True)
class KeptCatalog:
    """A run's kept catalog as data: its family, the file it is kept under, its bytes and
    the hash the run's manifest records for them. Small and picklable: it travels with
    the work to every executor."""

    benchmark: str
    file: str
    data: bytes = field(repr=False)
    recorded_sha256: str

    def pin(self) -> None:
        """From now on this process resolves the run's cases against this catalog."""
        try:
            family(self.benchmark).pin_kept_catalog(self.data, self.recorded_sha256)
        except CatalogError as exc:
            raise KeptCatalogError(str(exc)) from exc


def keep_run_catalog(run_root: Path, benchmark: str) -> None:
    """At a run's first launch: keep the catalog its plan was built on, if its family
    keeps one (the manifest and the plan name it by its hash)."""
    chosen = family(benchmark)
    name, data = chosen.kept_catalog_file, chosen.kept_catalog()
    if name is not None and data is not None:
        publish_bytes(run_root / name, data)


def _recorded_sha256(run_dir: Path) -> str | None:
    try:
        manifest = json.loads((run_dir / MANIFEST_FILE).read_text(encoding="utf-8"))
        return str(manifest["protocol"]["catalog_sha256"])
    except (OSError, ValueError, KeyError, TypeError):
        return None  # not a run, or not yet: the command itself says so


def read_run_catalog(run_dir: Path) -> KeptCatalog | None:
    """The catalog `run_dir` kept (the file a registered family keeps its runs' catalog
    under), with the hash its manifest records; None when it keeps none."""
    recorded = _recorded_sha256(run_dir)
    if recorded is None:
        return None
    for name, chosen in families().items():
        file = chosen.kept_catalog_file
        if file is None:
            continue
        path = run_dir / file
        try:
            data = path.read_bytes()
        except FileNotFoundError:
            continue
        except OSError as exc:
            raise KeptCatalogError(f"{path} cannot be read: {exc.strerror or exc}") from exc
        return KeptCatalog(benchmark=name, file=file, data=data, recorded_sha256=recorded)
    return None


def pin_run_catalog(run_dir: Path) -> KeptCatalog | None:
    """Pin this process to the catalog `run_dir` kept (if it keeps one) and return it:
    the one way report, audit, replay, view, export, compare and a launch read a run's
    cases. Raises `KeptCatalogError` when the kept file disagrees with the manifest."""
    kept = read_run_catalog(run_dir)
    if kept is not None:
        kept.pin()
    return kept
