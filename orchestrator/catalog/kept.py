"""The catalog a run keeps in its directory: written once, read and pinned one way.

A family whose catalog is made from something outside the installed package (a local
LIBERO-Para copy) has its catalog kept beside the run's manifest at the first launch,
and the manifest records its hash. From then on everything about the run resolves its
cases against that kept catalog, whatever the copy holds by then, and whether or not it
is there at all:

- every command that reads a run (report, audit, replay, view, export, compare) pins
  the run's kept catalog through `pin_run_catalog`, so each names a case's paraphrase
  cell the same way;
- the work a launch hands its executor carries the kept catalog as data
  (`LaunchConfig.kept`), and each worker pins it before it resolves a case: a Ray
  worker on another node gets it inside its work, never through the driver's
  environment; a replay's worker processes get it the same way.

The LIBERO-Plus catalog is frozen in the installed package: a LIBERO-Plus run keeps
nothing, and neither does a LIBERO or LIBERO-PRO run.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

from mailroom.hashing import sha256_bytes
from mailroom.mailbox.publish import publish_bytes
from mailroom.orchestrator.catalog.frozen import CatalogError
from mailroom.orchestrator.catalog.para import (
    PARA_CATALOG_FILE,
    load_para_catalog,
    parse_para_catalog,
    pin_para_catalog,
    render_para,
)

MANIFEST_FILE = "manifest.json"
# The benchmark whose runs keep a catalog, and the file it is kept under.
KEEPING: dict[str, str] = {"libero_para": PARA_CATALOG_FILE}


class KeptCatalogError(CatalogError, ValueError):
    """A run's kept catalog does not hash to what its manifest records, or cannot be read."""


@dataclass(frozen=True)
class KeptCatalog:
    """A run's kept catalog as data: `file` in the run directory, its bytes, and the hash
    the run's manifest records for them. Small and picklable: it travels with the work."""

    benchmark: str
    file: str
    data: bytes = field(repr=False)
    recorded_sha256: str

    def pin(self) -> None:
        """From now on this process resolves the run's cases against this catalog."""
        if sha256_bytes(self.data) != self.recorded_sha256:
            raise KeptCatalogError(
                f"the kept {self.file} does not hash to the catalog the run's manifest records"
            )
        try:
            catalog = parse_para_catalog(self.data)
        except ValueError as exc:
            raise KeptCatalogError(f"the kept {self.file} cannot be read: {exc}") from exc
        pin_para_catalog(catalog)


def keep_run_catalog(run_root: Path, benchmark: str) -> None:
    """At a run's first launch: keep the catalog its plan was built on, if its benchmark
    keeps one (the manifest and the plan name it by its hash)."""
    name = KEEPING.get(benchmark)
    if name is not None:
        publish_bytes(run_root / name, render_para(load_para_catalog()))


def _recorded_sha256(run_dir: Path) -> str | None:
    try:
        manifest = json.loads((run_dir / MANIFEST_FILE).read_text(encoding="utf-8"))
        return str(manifest["protocol"]["catalog_sha256"])
    except (OSError, ValueError, KeyError, TypeError):
        return None  # not a run, or not yet: the command itself says so


def read_run_catalog(run_dir: Path) -> KeptCatalog | None:
    """The catalog `run_dir` kept, checked against its manifest; None when it keeps none."""
    recorded = _recorded_sha256(run_dir)
    if recorded is None:
        return None
    for benchmark, name in KEEPING.items():
        path = run_dir / name
        if not path.is_file():
            continue
        try:
            data = path.read_bytes()
        except OSError as exc:
            raise KeptCatalogError(f"{path} cannot be read: {exc.strerror or exc}") from exc
        if sha256_bytes(data) != recorded:
            raise KeptCatalogError(
                f"{path} does not hash to the catalog the run's manifest records"
            )
        return KeptCatalog(benchmark=benchmark, file=name, data=data, recorded_sha256=recorded)
    return None


def pin_run_catalog(run_dir: Path) -> KeptCatalog | None:
    """Pin this process to the catalog `run_dir` kept (if it keeps one) and return it:
    the one way report, audit, replay, view, export, compare and a launch read a run's
    cases. Raises `KeptCatalogError` when the kept file disagrees with the manifest."""
    kept = read_run_catalog(run_dir)
    if kept is not None:
        kept.pin()
    return kept
