"""LIBERO-Para from a local copy: paraphrased LIBERO-Goal instructions, pinned by hash.

LIBERO-Para is a data set of BDDL files, each a LIBERO-Goal task with its language line
rewritten; no package index carries it, so mailroom reads a copy the user has. Each file
is matched to its Goal task by content, never by name: with the language line left out,
its text must equal exactly one installed LIBERO-Goal task's (whitespace aside), and it
must parse with LIBERO's own BDDL parser. A file that does not parse, or that differs
from every Goal task beyond its language line (a paraphrase must not change the scene or
the goal), is refused with the reason.

The copy declares a file's paraphrase-type cell by the folder it sits in (`DIR/<cell>/
*.bddl`; a file directly in DIR has none), and its revision by a `REVISION` file in DIR
or by being a Hugging Face snapshot folder (`.../snapshots/<40-hex commit>`). The
catalog made from a copy is content-addressed: its hash covers every file's path, hash,
cell and match, and the revision, never where the copy lives.
"""

from __future__ import annotations

import json
import re
import tempfile
from collections import Counter
from collections.abc import Iterable
from functools import cache
from pathlib import Path
from typing import Annotated, Literal

from mailroom.benchmarks.libero.catalog import catalog_sha256, load_catalog
from mailroom.hashing import sha256_bytes, sha256_file
from mailroom.mailbox.messages import MAX_INSTRUCTION_CHARS
from mailroom.mailbox.publish import document_bytes
from mailroom.orchestrator.catalog.entries import (
    CatalogEntry,
    CatalogError,
    FrozenModel,
    TaskIndexError,
)
from pydantic import Field, model_validator

PARA_SUITE = "libero_para"
PARA_SCHEMA: Literal["mailroom.libero_para_catalog/v1"] = "mailroom.libero_para_catalog/v1"
# What a user may set instead of giving --para-dir: read by the command line, never
# written (the declared copy is the family's `ParaSource`).
PARA_DIR_VARIABLE = "MAILROOM_PARA_DIR"
GOAL_SUITE = "libero_goal"
PARA_CATALOG_FILE = "para_catalog.json"  # in a LIBERO-Para run's directory
MAX_BDDL_BYTES = 1024 * 1024
_LANGUAGE = re.compile(r"\(:language\b[^)]*\)")
_COMMIT = re.compile(r"^[0-9a-f]{40}$")
# A file's path in the copy (its folders name its cell): plain names only.
_PATH = re.compile(r"^[A-Za-z0-9_+-][A-Za-z0-9_.+-]{0,99}(/[A-Za-z0-9_+-][A-Za-z0-9_.+-]{0,99})*$")
_REVISION = re.compile(r"^[A-Za-z0-9_.+-]{1,100}$")
MAX_REVISION_BYTES = 256
NonNegative = Annotated[int, Field(ge=0)]


class ParaCopyError(CatalogError):
    """The LIBERO-Para copy cannot be read, is not set, or changed since a plan."""


class ParaEntry(CatalogEntry):
    """A paraphrase that runs: its Goal task's scene, released states and BDDL, with the
    paraphrase's language delivered. `para_path` is the file in the copy."""

    para_path: str
    para_sha256: Annotated[str, Field(pattern=r"^[0-9a-f]{64}$")]
    cell: str | None
    goal_task_index: NonNegative
    goal_instruction: str


class ParaRefused(FrozenModel):
    para_path: str
    para_sha256: str | None
    reason: str


class ParaCatalog(FrozenModel):
    schema_: Literal["mailroom.libero_para_catalog/v1"] = Field(default=PARA_SCHEMA, alias="schema")
    revision: str | None
    goal_catalog_sha256: Annotated[str, Field(pattern=r"^[0-9a-f]{64}$")]
    cells: dict[str, NonNegative]
    entries: list[ParaEntry]
    refused: list[ParaRefused]

    @model_validator(mode="after")
    def _consistent(self) -> ParaCatalog:
        if [e.task_index for e in self.entries] != list(range(len(self.entries))):
            raise ValueError("entries are not indexed 0..n-1 in path order")
        counted = Counter(e.cell or "" for e in self.entries)
        if dict(counted) != self.cells:
            raise ValueError("cells disagree with the entries")
        return self

    def entry(self, task_index: int) -> ParaEntry:
        if not 0 <= task_index < len(self.entries):
            raise TaskIndexError(
                f"{PARA_SUITE} has no task index {task_index}: the copy has "
                f"{len(self.entries)} runnable paraphrases"
            )
        return self.entries[task_index]

    def select(self, cell: str | None, goal_tasks: list[int] | None) -> list[ParaEntry]:
        if cell is not None and cell not in self.cells:
            known = ", ".join(sorted(self.cells)) or "none"
            raise CatalogError(f"the LIBERO-Para copy has no cell {cell!r}; its cells: {known}")
        return [
            e
            for e in self.entries
            if (cell is None or (e.cell or "") == cell)
            and (goal_tasks is None or e.goal_task_index in goal_tasks)
        ]


NO_CELL = "(none)"  # how a paraphrase that sits directly in the copy is reported


def para_task_name(goal_task_name: str, para_path: str) -> str:
    """A paraphrase's task name: its Goal task's name, then its file's path in the copy
    (whose folders name its cell). The one place this format is written."""
    return f"{goal_task_name}/{para_path}"


def goal_task_of(task_name: str) -> str:
    """The Goal task a paraphrase's task name names."""
    return task_name.partition("/")[0]


def cell_of(task_name: str) -> str:
    """A paraphrase's cell, read from its task name (`NO_CELL` for none)."""
    cell = Path(task_name.partition("/")[2]).parent.as_posix()
    return NO_CELL if cell == "." else cell


def _without_language(text: str) -> str:
    return " ".join(_LANGUAGE.sub(" ", text).split())


def _parse(path: Path) -> str:
    """The language LIBERO's parser reads from a BDDL file (the env's instruction);
    raises on a file the parser refuses."""
    from mailroom.orchestrator.packages.headless import simulator_chatter_to_stderr

    with simulator_chatter_to_stderr():
        from libero.libero.envs import bddl_utils

        bddl_utils.robosuite_parse_problem(str(path))
        language = bddl_utils.get_problem_info(str(path))["language_instruction"]
    return str(language)


@cache
def _goal_scenes() -> dict[str, tuple[int, str]]:
    """Each installed LIBERO-Goal task's BDDL without its language line."""
    from mailroom.benchmarks.libero.package_dir import libero_package_dir

    root = libero_package_dir()
    scenes: dict[str, tuple[int, str]] = {}
    for entry in load_catalog().suite_entries(GOAL_SUITE):
        text = (root / entry.bddl_path).read_text(encoding="utf-8")
        scenes[_without_language(text)] = (entry.task_index, entry.instruction)
    return scenes


def _first_difference(a: str, b: str) -> str:
    words_a, words_b = a.split(), b.split()
    for n, (x, y) in enumerate(zip(words_a, words_b, strict=False)):
        if x != y:
            return f"at word {n}: {' '.join(words_a[max(0, n - 3) : n + 4])!r}"
    return "in length"


def _closest(text: str) -> str:
    """The Goal task whose problem and scene the file names, for a refusal's message."""
    head = text.split("(:init")[0]
    for scene, (index, _) in _goal_scenes().items():
        if scene.split("(:init")[0] == head:
            where = _first_difference(text, scene)
            return f"LIBERO-Goal task {index} beyond its language line, {where}"
    return "every LIBERO-Goal task's problem and scene"


def _snapshot_blobs(directory: Path) -> Path | None:
    """A Hugging Face snapshot folder's blob store (its files are links into it)."""
    resolved = directory.resolve()
    if resolved.parent.name == "snapshots" and _COMMIT.match(resolved.name):
        return resolved.parent.parent / "blobs"
    return None


def copy_revision(directory: Path) -> str | None:
    """A `REVISION` file's word, else a snapshot folder's commit, else None."""
    marker = directory / "REVISION"
    if marker.is_symlink():
        raise ParaCopyError(f"{marker} is a link: the copy's revision is read from a file")
    if marker.is_file():
        with marker.open("rb") as stream:
            data = stream.read(MAX_REVISION_BYTES + 1)
        found = data.decode("utf-8", errors="replace").strip()
        if len(data) > MAX_REVISION_BYTES or not _REVISION.match(found):
            raise ParaCopyError(
                f"{marker} does not hold a revision (a commit hash or a short word of "
                "letters, digits, '.', '_', '+' and '-')"
            )
        return found
    blobs = _snapshot_blobs(directory)
    return None if blobs is None else directory.resolve().name


def _shown(relative: str) -> str:
    """A path as the catalog may hold it: undecodable bytes spelled out, never raw."""
    return relative.encode("utf-8", "backslashreplace").decode("utf-8")


def _bddl_files(directory: Path) -> list[Path]:
    return sorted(
        (p for p in directory.rglob("*.bddl") if p.is_file() or p.is_symlink()),
        key=lambda p: _shown(p.relative_to(directory).as_posix()),
    )


def _readable(path: Path, directory: Path) -> str | None:
    """Why a file of the copy is not read (None when it is): links only into a
    snapshot's blob store, regular files of bounded size."""
    if path.is_symlink():
        blobs = _snapshot_blobs(directory)
        target = path.resolve()
        if blobs is None or not target.is_relative_to(blobs):
            return "a link outside the copy's blob store: the copy's files are read in place"
    if not path.resolve().is_file():
        return "not a regular file"
    if path.stat().st_size > MAX_BDDL_BYTES:
        return f"larger than {MAX_BDDL_BYTES} bytes"
    return None


def _language_of(data: bytes) -> str:
    """The language LIBERO's parser reads from these exact bytes (the ones hashed)."""
    with tempfile.TemporaryDirectory(prefix="mailroom-para-") as scratch:
        path = Path(scratch) / "paraphrase.bddl"
        path.write_bytes(data)
        return _parse(path)


def read_para_copy(directory: Path) -> ParaCatalog:
    """The catalog of a LIBERO-Para copy: every BDDL file under `directory`, matched or
    refused. The copy is untrusted data: a file that cannot be read is refused, never
    followed out of the copy, never read past a bound."""
    if not directory.is_dir():
        raise ParaCopyError(f"{directory} is not a directory")
    goal = load_catalog().suite_entries(GOAL_SUITE)
    entries: list[ParaEntry] = []
    refused: list[ParaRefused] = []
    try:
        files = _bddl_files(directory)
    except OSError as exc:
        raise ParaCopyError(f"cannot list {directory}: {exc.strerror or exc}") from exc
    for path in files:
        relative = _shown(path.relative_to(directory).as_posix())
        parent = _shown(path.parent.relative_to(directory).as_posix())
        cell = None if parent == "." else parent

        def refuse(reason: str, digest: str | None = None, rel: str = relative) -> None:
            refused.append(ParaRefused(para_path=rel, para_sha256=digest, reason=reason))

        if not _PATH.match(relative):
            refuse("its path is not letters, digits, '.', '_', '+', '-' and '/'")
            continue
        try:
            unreadable = _readable(path, directory)
            if unreadable is not None:
                refuse(unreadable)
                continue
            with path.open("rb") as stream:
                data = stream.read(MAX_BDDL_BYTES + 1)
        except OSError as exc:
            refuse(f"cannot be read: {exc.strerror or exc}")
            continue
        digest = sha256_bytes(data)
        if len(data) > MAX_BDDL_BYTES:
            refuse(f"larger than {MAX_BDDL_BYTES} bytes", digest)
            continue
        try:
            text = data.decode("utf-8")
            language = _language_of(data)
        except Exception as exc:  # the parser's own failure, whatever it raises
            refuse(f"does not parse: {type(exc).__name__}: {_shown(str(exc))[:200]}", digest)
            continue
        if not language.strip():
            refuse("has no language line", digest)
            continue
        if len(language) > MAX_INSTRUCTION_CHARS:
            refuse(f"its language is longer than an observation's {MAX_INSTRUCTION_CHARS}", digest)
            continue
        match = _goal_scenes().get(_without_language(text))
        if match is None:
            refuse(f"differs from {_closest(_without_language(text))}", digest)
            continue
        index, goal_instruction = match
        base = goal[index]
        entries.append(
            ParaEntry(
                benchmark="libero_para",
                suite=PARA_SUITE,
                base_suite=GOAL_SUITE,
                task_index=len(entries),
                task_name=para_task_name(base.task_name, relative),
                instruction=language,
                instruction_source="bddl.language_instruction",
                task_language=base.task_language,
                bddl_language=language,
                bddl_path=base.bddl_path,
                bddl_sha256=base.bddl_sha256,
                init_states_path=base.init_states_path,
                init_states_sha256=base.init_states_sha256,
                n_init_states=base.n_init_states,
                state_dim=base.state_dim,
                horizon=base.horizon,
                horizon_source=f"the {GOAL_SUITE} reference horizon of the LIBERO catalog",
                para_path=relative,
                para_sha256=digest,
                cell=cell,
                goal_task_index=index,
                goal_instruction=goal_instruction,
            )
        )
    cells = Counter(e.cell or "" for e in entries)
    return ParaCatalog(
        revision=copy_revision(directory),
        goal_catalog_sha256=catalog_sha256(),
        cells=dict(cells),
        entries=entries,
        refused=refused,
    )


def render_para(catalog: ParaCatalog) -> bytes:
    return document_bytes(catalog.model_dump(mode="json", by_alias=True), sort_keys=False)


def parse_para_catalog(data: bytes) -> ParaCatalog:
    return ParaCatalog.model_validate(json.loads(data.decode("utf-8")))


def para_catalog_sha256(catalog: ParaCatalog) -> str:
    return sha256_bytes(render_para(catalog))


class ParaSource:
    """Where this process reads LIBERO-Para cases from: the catalog a run kept, once
    pinned (`pin`), else the copy this command declared (`declare`). The family object
    holds one; nothing of it reaches a child process: a worker is handed its run's kept
    catalog inside its work (families/kept.py) and never reads a copy."""

    def __init__(self) -> None:
        self._declared: Path | None = None
        self._pinned: ParaCatalog | None = None
        self._read: ParaCatalog | None = None

    @property
    def declared(self) -> Path | None:
        """The copy this command declared, if any."""
        return self._declared

    def declare(self, directory: Path | None) -> None:
        """`directory` is the copy this command reads (None: none); a copy read afresh."""
        self._declared = None if directory is None else directory.resolve()
        self._pinned = None
        self._read = None

    def pin(self, catalog: ParaCatalog | None) -> None:
        """From now on cases resolve against `catalog` (a run's kept catalog), whatever a
        declared copy holds; None: the declared copy again."""
        self._pinned = catalog
        self._read = None

    def reread(self) -> None:
        """Forget what was read of the declared copy: the next lookup reads it again."""
        self._read = None

    def declared_dir(self) -> Path:
        if self._declared is None:
            raise ParaCopyError(
                f"no LIBERO-Para copy is declared: give --para-dir DIR (or set {PARA_DIR_VARIABLE})"
            )
        return self._declared

    def catalog(self) -> ParaCatalog:
        """The pinned catalog, or else the declared copy's; either must have been matched
        against the installed LIBERO-Goal tasks."""
        if self._pinned is not None:
            found = self._pinned
        elif self._read is not None:
            found = self._read
        else:
            directory = self.declared_dir()
            try:
                found = read_para_copy(directory)
            except (OSError, ValueError) as exc:
                raise ParaCopyError(
                    f"the LIBERO-Para copy {directory} cannot be read: {exc}"
                ) from exc
            self._read = found
        if found.goal_catalog_sha256 != catalog_sha256():
            raise ParaCopyError(
                "the LIBERO-Para catalog was matched against another LIBERO catalog "
                f"({found.goal_catalog_sha256}) than the installed one"
            )
        return found

    def check_copy(self, task_indices: Iterable[int]) -> None:
        """Where this command declared a copy, each named entry's file in it must still
        hash to what the catalog in use recorded: a launch, resume or replay checks it
        before any worker starts (workers never read the copy: it may not be on their
        node)."""
        if self._declared is None:
            return
        catalog = self.catalog()
        for task_index in sorted(set(task_indices)):
            entry = catalog.entry(task_index)
            copy = self._declared / entry.para_path
            if not copy.is_file() or sha256_file(copy) != entry.para_sha256:
                raise ParaCopyError(
                    f"{copy} is missing or changed since the LIBERO-Para catalog was read: "
                    "the copy is not the one the plan pinned"
                )


def para_document(catalog: ParaCatalog) -> dict[str, object]:
    document: dict[str, object] = json.loads(render_para(catalog))
    document["catalog_sha256"] = para_catalog_sha256(catalog)
    return document
