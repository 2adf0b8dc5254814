"""What every family's catalog is made of: its entries, their errors, reference horizons.

A family reads its own catalog (a frozen file, a local copy) into these; plans, cases,
the runner and the reports see nothing else of it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field

# A benchmark family's name as entries, plans and cases carry it: any family the registry
# (`families/`) knows, so a plain name here.
BenchmarkName = Annotated[str, Field(pattern=r"^[a-z][a-z0-9_]{0,63}$")]
InstructionSource = Literal[
    "task.language", "bddl.language_instruction", "task.language_without_perturbation"
]
Sha256 = Annotated[str, Field(pattern=r"^[0-9a-f]{64}$")]
RelativePath = Annotated[str, Field(pattern=r"^[A-Za-z0-9_.-]+(/[A-Za-z0-9_.-]+)*$")]
Positive = Annotated[int, Field(ge=1)]


class CatalogError(Exception):
    """A catalog lookup or consistency failure, with a message meant for people."""


class UnknownSuiteError(CatalogError, KeyError):
    def __str__(self) -> str:  # KeyError would quote the message
        return str(self.args[0]) if self.args else ""


class TaskIndexError(CatalogError, KeyError):
    def __str__(self) -> str:
        return str(self.args[0]) if self.args else ""


class InstructionMismatchError(CatalogError):
    """The simulator's instruction differs from the one the catalog froze."""


class FrozenModel(BaseModel):
    """The base of the catalog's and the plans' models: frozen data, read exactly.

    Unknown fields are refused and nothing is coerced (strict: a "3" is not a task
    index), so a file that validates says what it means, to the letter.
    """

    model_config = ConfigDict(extra="forbid", frozen=True, strict=True)


class CatalogEntry(FrozenModel):
    benchmark: BenchmarkName
    suite: str
    base_suite: str
    task_index: Annotated[int, Field(ge=0)]
    task_name: str
    # What an actor is given. Standard suites use the benchmark's task language, as the
    # field's evaluators do; PRO suites use their BDDL's language (`env.language_instruction`),
    # because their `task.language` is the base task's text.
    instruction: Annotated[str, Field(min_length=1)]
    instruction_source: InstructionSource
    task_language: str
    bddl_language: str
    bddl_path: RelativePath
    bddl_sha256: Sha256
    init_states_path: RelativePath
    init_states_sha256: Sha256
    n_init_states: Positive
    state_dim: Positive
    horizon: Positive
    horizon_source: str


@dataclass(frozen=True)
class ReferenceHorizon:
    controls: int
    source: str
