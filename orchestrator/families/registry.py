"""The registered benchmark families, found through the `mailroom.benchmarks` entry-point
group: the built-in four are registered there by this project's own pyproject.toml, and
any installed distribution may add more. An entry point names a `BenchmarkFamily` object
(or a callable returning one); its name is the family's `name`.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from functools import cache
from importlib.metadata import entry_points
from pathlib import Path
from typing import Any

from mailroom.mailbox.protocol import MailboxProtocol
from mailroom.orchestrator.catalog.cases import Case
from mailroom.orchestrator.catalog.entries import CatalogEntry, ReferenceHorizon, UnknownSuiteError
from mailroom.orchestrator.families.base import (
    BenchmarkFamily,
    Packages,
    UnknownBenchmarkError,
)
from mailroom.orchestrator.sim.base import SimulatorFactory
from mailroom.orchestrator.sim.specs import (
    protocol_for,
    protocol_v1_problems,
    protocol_v2_problems,
)

ENTRY_POINT_GROUP = "mailroom.benchmarks"
# The family a simulator is built for when nothing names one (a worker configured by
# hand, a demo): the registry's, so no other module names a family.
DEFAULT_BENCHMARK = "libero"


class FamilyConflictError(RuntimeError):
    """Two registered families claim the same name or the same suite."""


class FamilyShapeError(FamilyConflictError):
    """A family's action or observation spec that the mailbox protocol cannot carry."""


def _load(value: object, name: str) -> BenchmarkFamily:
    family = value() if callable(value) and not isinstance(value, BenchmarkFamily) else value
    if not isinstance(family, BenchmarkFamily):
        raise FamilyConflictError(f"entry point {name!r} is not a benchmark family")
    if family.name != name:
        raise FamilyConflictError(f"entry point {name!r} names family {family.name!r}")
    action, observation = family.action_spec, family.observation_spec
    if not protocol_v1_problems(action, observation):
        return family
    problems = protocol_v2_problems(action, observation)
    if not problems and family.actor_guide is None:
        problems = ["no actor guide (a family of protocol v2 describes its actions to actors)"]
    if problems:
        raise FamilyShapeError(
            f"family {name!r} declares what the mailbox protocol cannot carry: "
            + "; ".join(problems)
        )
    return family


@cache
def families() -> dict[str, BenchmarkFamily]:
    """Every registered family by name, in entry-point name order."""
    found: dict[str, BenchmarkFamily] = {}
    for point in sorted(entry_points(group=ENTRY_POINT_GROUP), key=lambda p: p.name):
        if point.name in found:
            continue  # one distribution seen twice on the path (an editable install)
        found[point.name] = _load(point.load(), point.name)
    return found


def family(name: str) -> BenchmarkFamily:
    """The family a plan, case or result names as its `benchmark`."""
    found = families().get(name)
    if found is None:
        known = ", ".join(families()) or "none"
        raise UnknownBenchmarkError(f"no benchmark family {name!r} is registered ({known})")
    return found


def benchmark_names() -> tuple[str, ...]:
    return tuple(families())


def family_of_suite(suite: str) -> BenchmarkFamily:
    """The family that owns a suite; an unknown suite raises the catalog's typed error."""
    owners = [f for f in families().values() if f.owns(suite)]
    if len(owners) > 1:
        names = ", ".join(f.name for f in owners)
        raise FamilyConflictError(f"suite {suite!r} is claimed by several families: {names}")
    if not owners:
        raise UnknownSuiteError(f"unknown suite {suite!r}; the catalogs have: {_all_suites()}")
    return owners[0]


def _all_suites() -> str:
    return ", ".join(s for f in families().values() for s in f.suites())


def catalog_entry(suite: str, task_index: int) -> CatalogEntry:
    """A suite's entry, from whichever family's catalog holds the suite."""
    return family_of_suite(suite).entry(suite, task_index)


def family_of_case(case: Case) -> BenchmarkFamily:
    return family(case.benchmark)


def reference_horizon(suite: str) -> ReferenceHorizon:
    """A suite's reference horizon, from the family that owns it."""
    return family_of_suite(suite).reference_horizon(suite)


def catalog_sha256_of(benchmark: str) -> str:
    """The hash of the catalog a benchmark's plans are built against."""
    return family(benchmark).catalog_sha256()


def run_family_errors(manifest: Mapping[str, Any]) -> list[str]:
    """What a run's manifest (the current version's document) names that this registry
    does not know: its benchmark unregistered, or an adapter other than its family's. A
    manifest that did not record its benchmark (its plan names it) passes."""
    protocol = manifest.get("protocol")
    if not isinstance(protocol, Mapping) or protocol.get("benchmark") is None:
        return []
    try:
        named = family(str(protocol["benchmark"]))
    except UnknownBenchmarkError as exc:
        return [str(exc)]
    if protocol.get("adapter") != named.adapter:
        return [
            f"protocol.adapter is {protocol.get('adapter')!r}, "
            f"the {named.name} family's adapter is {named.adapter!r}"
        ]
    return []


def simulator_factory(benchmark: str | None = None) -> SimulatorFactory:
    """The one default simulator factory: the named family's, else the default family's."""
    return family(benchmark or DEFAULT_BENCHMARK).simulator_factory()


def public_names() -> tuple[str, ...]:
    """Every registered family's public name words, each once."""
    return tuple(dict.fromkeys(n for f in families().values() for n in f.public_names))


def all_packages(selected: Iterable[BenchmarkFamily] | None = None) -> Packages:
    """The union of the families' package declarations, in registration order."""
    chosen = list(families().values() if selected is None else selected)

    def union(part: str) -> tuple[str, ...]:
        return tuple(dict.fromkeys(n for f in chosen for n in getattr(f.packages, part)))

    return Packages(
        recorded=union("recorded"),
        simulation=union("simulation"),
        recorded_since=union("recorded_since"),
        modules=union("modules"),
    )


def private_paths() -> tuple[Path, ...]:
    """Every family's further private folders (declared local copies)."""
    return tuple(p for f in families().values() for p in f.private_paths())


def family_protocol(name: str) -> MailboxProtocol:
    """The mailbox protocol the actors of family `name` speak (`sim/specs.py`)."""
    chosen = family(name)
    return protocol_for(chosen.action_spec, chosen.observation_spec)
