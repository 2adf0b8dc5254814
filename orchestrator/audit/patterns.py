"""What counts as private in a run, as rules over text: the audit's patterns.

Identifiers come from the run's manifest, plan and attempt directories, and from the
frozen catalog: the run's own names, case ids, benchmark, suite and task names, BDDL
files, seeds, initial-state indices, keys that name them, and dates. `scan.py` decides
what an actor could read; this module says, for any text, which of these it names.

Where a text comes from decides how a find is judged. What the evaluator HANDS an actor
(argv, environment, instructions, its endpoint's path, everything under `outbox/`) must
name nothing private. What an actor WRITES itself (under `inbox/` and `scratch/`, and
anything else under its endpoint) is judged by what it could know without being told:
any date (its model provider tells it today's) and the benchmark's public name (it may
recognise LIBERO's public scenes) are information, never a leak; every other kind fails.

Matching is by whole tokens, so that a seed 7 is not found inside 0.7, and a seed or a
date is not found inside a hex string (a request id, a token, a hash) either: its
neighbours are letters or digits. Hex strings are not skipped wholesale, because a run
may well be named by one. Hex request ids are blanked, and so is the attempt's own task
instruction: it is public, delivered on purpose.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import get_args

from mailroom.orchestrator.actors.profiles import INSTRUCTION_FILES, actor_instructions_template
from mailroom.orchestrator.catalog.cases import Case
from mailroom.orchestrator.catalog.entries import CatalogError
from mailroom.orchestrator.families.base import UnknownBenchmarkError
from mailroom.orchestrator.families.registry import families, family_of_suite, public_names
from mailroom.orchestrator.records.audit_verdict import (
    MAX_EXCERPT,
    UNTOLD,
    IdentifierKind,
    InformationKind,
    Source,
)
from mailroom.timestamps import utc_timestamp

# Seeds this long are searched as whole numbers anywhere; shorter ones only next to "seed".
WHOLE_NUMBER_SEED_DIGITS = 5
MIN_NAME_LENGTH = 3


# Rules run on a masked, ASCII-lowercased copy of the text (same length, same offsets).

_WORD_CHARS = frozenset("0123456789abcdefghijklmnopqrstuvwxyz")
_ASCII_LOWER = str.maketrans("ABCDEFGHIJKLMNOPQRSTUVWXYZ", "abcdefghijklmnopqrstuvwxyz")
_NUMBER_LEFT = r"(?<![0-9a-z])(?<!\d\.)"  # not inside a word or after a decimal point
_NUMBER_RIGHT = r"(?![0-9a-z])(?!\.\d)"
_CONNECTIVE = r"(?:(?:is|was|of|at|no|number|index)\W{1,3})?"
_SEED_CONTEXT = r"(?<![a-z])seed[a-z_]*\W{0,5}" + _CONNECTIVE
_STATE_CONTEXT = (
    r"(?<![a-z])(?:init(?:ial)?[ _-]?states?|state[ _-]?(?:index|idx|id|no))"
    r"[a-z_]*\W{0,5}" + _CONNECTIVE
)
_KEY = re.compile(r"[\"']([^\"'\n]{1,200})[\"']\s*:")
_KEY_WORDS = r"suite|seed|bddl|init_?state|initial_?state|state_?index"
_BDDL_NAME = re.compile(r"\.bddl(?![0-9a-z])")
_DAY = r"(?:0[1-9]|[12]\d|3[01])"
_MONTH = r"(?:0[1-9]|1[0-2])"
_ISO_DATE = re.compile(rf"(?<!\d)(?:19|20)\d\d-{_MONTH}-{_DAY}(?!\d)")
_COMPACT_DATE = re.compile(rf"{_NUMBER_LEFT}(?:19|20)\d\d{_MONTH}{_DAY}(?:(?=t\d)|{_NUMBER_RIGHT})")
_SCENE = re.compile(r"^((?:[A-Z]+_)+SCENE\d+)_")
# Only a hex request id is skipped: anything else in that place is searched like the rest.
_REQUEST_ID_VALUE = re.compile(r"""(?<=["']request_id["'])\s*:\s*["'][0-9A-Fa-f]{1,200}(?=["'])""")
_BLANKS = re.compile(r"[\s\x00-\x1f\x7f]+")
_MONTH_NAMES = (
    "jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec"
)  # fmt: skip


@dataclass(frozen=True)
class _Pattern:
    kind: IdentifierKind
    pattern: re.Pattern[str]
    exclude: frozenset[str] = frozenset()

    def spans(self, lowered: str) -> Iterator[tuple[int, int]]:
        for match in self.pattern.finditer(lowered):
            if match.group(0) not in self.exclude:
                yield match.span()


@dataclass(frozen=True)
class _Names:
    """Literal names as whole tokens: a substring search per name, then the boundaries."""

    kind: IdentifierKind
    names: tuple[str, ...]

    def spans(self, lowered: str) -> Iterator[tuple[int, int]]:
        for name in self.names:
            start = lowered.find(name)
            while start >= 0:
                end = start + len(name)
                if (start == 0 or lowered[start - 1] not in _WORD_CHARS) and (
                    end == len(lowered) or lowered[end] not in _WORD_CHARS
                ):
                    yield start, end
                start = lowered.find(name, start + 1)


@dataclass(frozen=True)
class _PrivateKeys:
    kind: IdentifierKind = "private_key"

    def spans(self, lowered: str) -> Iterator[tuple[int, int]]:
        for match in _KEY.finditer(lowered):
            if _private_key_word().search(match.group(1)):
                yield match.span()


_Rule = _Pattern | _Names | _PrivateKeys


def _alternation(names: Iterable[str]) -> str:
    unique = sorted(set(names), key=lambda n: (-len(n), n))
    return "|".join(re.escape(n) for n in unique)


def _names(kind: IdentifierKind, names: Iterable[str]) -> _Names | None:
    unique = sorted({n.lower() for n in names if n}, key=lambda n: (-len(n), n))
    return _Names(kind, tuple(unique)) if unique else None


def _ascii_lower(text: str) -> str:
    return text.lower() if text.isascii() else text.translate(_ASCII_LOWER)


def _words(text: str) -> tuple[str, ...]:
    return tuple(w for w in re.split(r"[^0-9a-z]+", text.lower()) if w)


def _distinctive(name: str, template_lowered: str) -> bool:
    """A name the shared instructions themselves contain (a run called `run`) cannot be
    told apart from them, so it is not searched for."""
    if len(name) < MIN_NAME_LENGTH:
        return False
    return not any(_Names("run_id", (name.lower(),)).spans(template_lowered))


def _run_date_rule(created_at: str | None) -> _Pattern | None:
    """The run's own creation date in the other ways people write dates."""
    match = re.match(r"^(\d{4})-(\d{2})-(\d{2})", created_at or "")
    if match is None:
        return None
    y, m, d = match.groups()
    month_name = _MONTH_NAMES[int(m) - 1]
    day = str(int(d))
    forms = [
        rf"{y}[/_.]{m}[/_.]{d}",
        rf"{d}[./]{m}[./]{y}",
        rf"{m}/{d}/{y}",
        rf"{month_name}[a-z]*\.?\s+0?{day},?\s+{y}",
        rf"0?{day}\s+{month_name}[a-z]*\.?,?\s+{y}",
    ]
    return _Pattern("date", re.compile(rf"(?<![0-9a-z])(?:{'|'.join(forms)})(?!\d)"))


@dataclass(frozen=True)
class _CaseFacts:
    task_names: frozenset[str]
    bddl_files: frozenset[str]


def _case_facts(cases: Iterable[Case]) -> _CaseFacts:
    """Each case's private names, as the family that owns its suite declares them (task
    names, the files its scene is built from)."""
    names: set[str] = set()
    files: set[str] = set()
    for case in cases:
        try:
            owner = family_of_suite(case.suite)
            declared = owner.private_names(owner.entry(case.suite, case.task_index))
        except (CatalogError, UnknownBenchmarkError):
            continue
        names |= declared.task_names
        files |= declared.file_names
    return _CaseFacts(frozenset(names), frozenset(files))


@cache
def _benchmark_words() -> frozenset[str]:
    """The registered families' public names (lowercase): `libero` for the built-in four."""
    return frozenset(n.lower() for n in public_names())


@cache
def _benchmark_pattern() -> re.Pattern[str]:
    return re.compile(f"(?<![a-z])(?:{_alternation(_benchmark_words())})")


@cache
def _private_key_word() -> re.Pattern[str]:
    """A word that makes a JSON key private: a benchmark's name, or suite, seed, BDDL and
    initial-state words."""
    words = _alternation(_benchmark_words())
    return re.compile(f"{words}|{_KEY_WORDS}" if words else _KEY_WORDS)


def _registered_suites() -> set[str]:
    """Every suite a registered family owns (one whose catalog cannot be read here, a
    LIBERO-Para copy not declared, adds none)."""
    found: set[str] = set()
    for registered in families().values():
        try:
            found.update(registered.suites())
        except CatalogError:
            continue
    return found


@dataclass(frozen=True)
class Identifiers:
    """The run's private identifiers, compiled once per audit."""

    rules: tuple[_Rule, ...]

    def find(
        self, text: str, *, instruction: str | None, actor_written: bool
    ) -> Iterator[tuple[IdentifierKind, str]]:
        """The first occurrence of each kind of identifier in `text`, with an excerpt."""
        lowered = _ascii_lower(_mask(text, instruction))
        public_words = _words(instruction) if instruction else None
        found: set[IdentifierKind] = set()
        for rule in self.rules:
            if rule.kind in found:
                continue
            for start, end in rule.spans(lowered):
                # A task name that is only the attempt's own instruction with underscores
                # tells an actor nothing it was not given: its own notes may use it.
                if (
                    rule.kind == "task_name"
                    and actor_written
                    and _words(lowered[start:end]) == public_words
                ):
                    continue
                # A key of its own that names nothing but the benchmark says no more than
                # the benchmark's name, which the benchmark rule reports on its own.
                if (
                    rule.kind == "private_key"
                    and actor_written
                    and set(_private_key_word().findall(lowered, start, end)) <= _benchmark_words()
                ):
                    continue
                found.add(rule.kind)
                yield rule.kind, excerpt(text, start, end)
                break


def information_kind(kind: IdentifierKind, source: Source) -> InformationKind | None:
    """The kind of information a find is (reported, never failing), or None for a leak:
    only what an actor wrote itself and could know untold is information."""
    return UNTOLD.get(kind) if source == "actor_written" else None


def build_identifiers(
    *,
    run_names: dict[IdentifierKind, str],
    cases: Iterable[Case],
    case_ids: Iterable[str],
    created_at: str | None,
) -> Identifiers:
    """The rules, in reporting order; a kind is reported once per place."""
    cases = list(cases)
    template = _ascii_lower("\n".join(map(actor_instructions_template, INSTRUCTION_FILES)))
    facts = _case_facts(cases)
    scenes = {m.group(1) for n in facts.task_names if (m := _SCENE.match(n)) is not None}
    seeds = {str(c.seed) for c in cases}
    long_seeds = {s for s in seeds if len(s) >= WHOLE_NUMBER_SEED_DIGITS}
    seed_pattern = f"{_SEED_CONTEXT}(?:{_alternation(seeds)}){_NUMBER_RIGHT}"
    if long_seeds:
        seed_pattern += f"|{_NUMBER_LEFT}(?:{_alternation(long_seeds)}){_NUMBER_RIGHT}"
    states = _alternation(str(c.init_state_index) for c in cases)
    candidates: list[_Rule | None] = [
        _names(kind, [name]) for kind, name in run_names.items() if _distinctive(name, template)
    ]
    candidates += [
        _names("case_id", case_ids),
        _Pattern("benchmark", _benchmark_pattern()),
        _names("suite", _registered_suites() | {c.suite for c in cases}),
        _names("task_name", facts.task_names | scenes),
        _names("bddl_file", facts.bddl_files),
        _Pattern("bddl_file", _BDDL_NAME),
        _Pattern("seed", re.compile(seed_pattern)) if seeds else None,
        (
            _Pattern("init_state_index", re.compile(f"{_STATE_CONTEXT}(?:{states}){_NUMBER_RIGHT}"))
            if states
            else None
        ),
        _PrivateKeys(),
        _Pattern("date", _ISO_DATE),
        # A seed such as 20260907 reads as a date too: it is reported once, as a seed.
        _Pattern("date", _COMPACT_DATE, exclude=frozenset(long_seeds)),
        _run_date_rule(created_at),
    ]
    return Identifiers(tuple(r for r in candidates if r is not None))


def _blank(match: re.Match[str]) -> str:
    return "x" * len(match.group(0))


def _mask(text: str, instruction: str | None) -> str:
    """Same length as `text` (excerpts use its offsets), with public parts blanked."""
    if instruction:
        text = text.replace(instruction, " " * len(instruction))
    return _REQUEST_ID_VALUE.sub(_blank, text)


def excerpt(text: str, start: int, end: int) -> str:
    """The match with as much context on each side as the bound allows, on one line."""
    room = MAX_EXCERPT - 6  # the two ellipses
    end = min(end, start + room)
    context = max(0, (room - (end - start)) // 2)
    a, b = max(0, start - context), min(len(text), end + context)
    body = _BLANKS.sub(" ", text[a:b])
    return (("..." if a > 0 else "") + body + ("..." if b < len(text) else ""))[:MAX_EXCERPT]


def run_identifiers(
    *,
    run_id: str,
    run_dir: Path,
    cases: Iterable[Case],
    case_ids: Iterable[str] = (),
    created_at: str | None,
) -> Identifiers:
    """The identifiers of a run: its id, its directory's name where that differs, its
    cases (each case's id among them) and the date it was created."""
    cases = list(cases)
    run_names: dict[IdentifierKind, str] = {"run_id": run_id}
    directory = run_dir.resolve().name
    if directory.lower() != run_id.lower():
        run_names["run_directory"] = directory
    return build_identifiers(
        run_names=run_names,
        cases=cases,
        case_ids={c.case_id for c in cases} | set(case_ids),
        created_at=created_at,
    )


def launch_identifiers(
    *, run_id: str, run_dir: Path, cases: Iterable[Case], created_at: str | None = None
) -> Identifiers:
    """What a launch knows before any actor starts: the run's id and directory, the
    plan's cases, and the run's creation time (default: now)."""
    return run_identifiers(
        run_id=run_id,
        run_dir=run_dir,
        cases=cases,
        created_at=utc_timestamp() if created_at is None else created_at,
    )


def path_disclosures(
    path: str | os.PathLike[str], identifiers: Identifiers
) -> list[tuple[IdentifierKind, str]]:
    """The private identifiers a path names, each kind once with an excerpt, in the
    audit's reporting order; empty when the path may be handed to an actor.

    A mailbox root and every endpoint under it are handed to actors, so the path is
    judged as handed text: a date or the benchmark's name counts too. The path is read
    as given and as the absolute path it resolves to (an actor may see either).
    """
    given = os.fspath(path)
    forms = dict.fromkeys((given, os.path.realpath(given)))
    found: dict[IdentifierKind, str] = {}
    for text in forms:
        for kind, shown in identifiers.find(text, instruction=None, actor_written=False):
            found.setdefault(kind, shown)
    order = {kind: i for i, kind in enumerate(get_args(IdentifierKind))}
    return sorted(found.items(), key=lambda item: order[item[0]])
