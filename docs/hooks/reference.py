"""The site's generated reference: an MkDocs hook (`hooks:` in mkdocs.yml).

A page asks for a generated part with a marker line of its own, `<!-- reference: NAME -->`
(or `<!-- reference: NAME ARGUMENT -->`); at build time the marker is replaced by text
made from the project itself, never copied into a page:

- `exit-codes`: `orchestrator/cli/exits.py`, each constant, its value and its comment;
- `run-directory`: `orchestrator/records/layout.py`'s docstring;
- `schemas`: every file of `schemas/`, by document kind and version (each file is also
  published under `reference/schemas/`);
- `changelog`: CHANGELOG.md, its headings moved one level down;
- `profile-fields`: the pydantic model of a method profile (`actors/profiles.py`) and
  every model it holds, field by field;
- `report-definitions`: the report's denominators and their meanings
  (`results/reporter.py`, `results/usage.py`);
- `launch-defaults`: the budgets and limits of `mailroom launch` and their defaults, from
  its click options, and an actor's default limits from `ActorLimits`;
- `architecture`: orchestrator/README.md, its headings moved one level down;
- `instructions VERSION`: the actor instructions of that version, verbatim.

A marker that names nothing known fails the build.
"""

from __future__ import annotations

import inspect
import io
import json
import re
import tokenize
import types
import typing
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import click
from mailroom.orchestrator.actors import profiles
from mailroom.orchestrator.actors.limits import ActorLimits
from mailroom.orchestrator.cli import exits
from mailroom.orchestrator.cli.main import main as cli_main
from mailroom.orchestrator.records import layout
from mailroom.orchestrator.results import reporter, usage
from mkdocs.config.defaults import MkDocsConfig
from mkdocs.exceptions import PluginError
from mkdocs.structure.files import File, Files
from mkdocs.structure.pages import Page
from pydantic import BaseModel
from pydantic.fields import FieldInfo
from pydantic_core import PydanticUndefined

MARKER = re.compile(r"^<!-- reference: ([a-z-]+)(?: ([^ ]+))? -->$", re.MULTILINE)
# Where each schema file is published in the site.
SCHEMA_DIR = "reference/schemas"
SCHEMA_NAME = re.compile(r"^(mailroom\.[a-z_]+)\.v(\d+)\.json$")


def _repository(config: MkDocsConfig) -> Path:
    return Path(config.config_file_path).resolve().parent


def _cell(text: str) -> str:
    """Text as one Markdown table cell."""
    return " ".join(text.split()).replace("|", "\\|")


def _demoted(markdown: str) -> str:
    """Every heading one level down (outside fenced code), so a document fits under a page's
    own title."""
    out: list[str] = []
    fenced = False
    for line in markdown.splitlines():
        if line.startswith("```"):
            fenced = not fenced
        if not fenced and re.match(r"^#{1,5} ", line):
            line = "#" + line
        out.append(line)
    return "\n".join(out)


# --- exit codes ---------------------------------------------------------------------


def exit_codes() -> list[tuple[str, int, str]]:
    """Each `EXIT_*` constant of exits.py: its name, its value and its comment."""
    source = inspect.getsource(exits)
    comments: dict[int, str] = {}
    for token in tokenize.generate_tokens(io.StringIO(source).readline):
        if token.type == tokenize.COMMENT:
            comments[token.start[0]] = token.string.lstrip("# ").strip()
    codes: list[tuple[str, int, str]] = []
    for number, line in enumerate(source.splitlines(), start=1):
        found = re.match(r"^(EXIT_[A-Z_]+) = ", line)
        if found:
            name = found.group(1)
            value = getattr(exits, name)
            assert isinstance(value, int)
            codes.append((name, value, comments.get(number, "")))
    return codes


def _exit_codes() -> str:
    rows = ["| code | constant | meaning |", "| ---: | --- | --- |"]
    rows += [f"| {v} | `{n}` | {_cell(c)} |" for n, v, c in exit_codes()]
    return "\n".join(rows)


# --- run directory ------------------------------------------------------------------


def _run_directory() -> str:
    doc = inspect.getdoc(layout) or ""
    head, _, rest = doc.partition("\n\n")
    tree, _, after = rest.partition("\n\n")
    return f"{head}\n\n```text\n{inspect.cleandoc(tree)}\n```\n\n{after}"


# --- schemas and their history ------------------------------------------------------


def _schema_key(path: Path) -> tuple[str, int]:
    found = SCHEMA_NAME.match(path.name)
    assert found is not None
    return found.group(1), int(found.group(2))


def schema_files(repository: Path) -> list[Path]:
    """Every document schema of `schemas/`, by kind, then version."""
    found = [p for p in (repository / "schemas").glob("*.json") if SCHEMA_NAME.match(p.name)]
    return sorted(found, key=_schema_key)


def _schemas(repository: Path) -> str:
    rows = [
        "| document | version | title | required members | file |",
        "| --- | ---: | --- | --- | --- |",
    ]
    for path in schema_files(repository):
        found = SCHEMA_NAME.match(path.name)
        assert found is not None
        schema = json.loads(path.read_text(encoding="utf-8"))
        required = ", ".join(f"`{r}`" for r in schema.get("required", []))
        title = _cell(str(schema.get("title", "")))
        rows.append(
            f"| `{found.group(1)}` | v{found.group(2)} | {title} | {required} "
            f"| [{path.name}](schemas/{path.name}) |"
        )
    return "\n".join(rows)


def _changelog(repository: Path) -> str:
    text = (repository / "CHANGELOG.md").read_text(encoding="utf-8")
    # Its own title is the page's section heading.
    body = text.split("\n", 1)[1] if text.startswith("# ") else text
    return _demoted(body)


# --- profile fields -----------------------------------------------------------------


def _constraint(item: object) -> str | None:
    names = {"ge": "≥", "gt": ">", "le": "≤", "lt": "<"}
    for attribute, symbol in names.items():
        if hasattr(item, attribute) and getattr(item, attribute) is not None:
            return f"{symbol} {getattr(item, attribute)}"
    if hasattr(item, "min_length") and getattr(item, "min_length", None) is not None:
        return f"at least {item.min_length} long"
    if hasattr(item, "max_length") and getattr(item, "max_length", None) is not None:
        return f"at most {item.max_length} long"
    pattern = getattr(item, "pattern", None)
    if pattern is not None:
        return f"matches `{pattern}`"
    if isinstance(item, FieldInfo):
        inner = [_constraint(m) for m in item.metadata]
        return ", ".join(c for c in inner if c) or None
    return None


def type_words(annotation: object, nested: list[type[BaseModel]]) -> str:
    """An annotation as people read it; each model met is added to `nested`."""
    origin = typing.get_origin(annotation)
    args = typing.get_args(annotation)
    if origin is typing.Annotated:
        inner = type_words(args[0], nested)
        limits = [c for c in (_constraint(m) for m in args[1:]) if c]
        return f"{inner} ({', '.join(limits)})" if limits else inner
    if origin in (typing.Union, types.UnionType):
        return " or ".join(type_words(a, nested) for a in args)
    if origin is typing.Literal:
        return " or ".join(json.dumps(a) for a in args)
    if origin is list:
        return f"list of {type_words(args[0], nested)}"
    if origin is dict:
        return f"object of {type_words(args[0], nested)} to {type_words(args[1], nested)}"
    if annotation is type(None):
        return "null"
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        if annotation not in nested:
            nested.append(annotation)
        return f"[{annotation.__name__}](#{annotation.__name__.lower()})"
    names = {str: "string", int: "integer", float: "number", bool: "boolean"}
    if isinstance(annotation, type) and annotation in names:
        return names[annotation]
    return str(annotation).replace("typing.", "")


def _default(field: FieldInfo) -> str:
    if field.is_required():
        return "required"
    if field.default_factory is not None:
        value: Any = field.default_factory()  # type: ignore[call-arg]
    else:
        value = field.default
    if value is PydanticUndefined:
        return "required"
    if isinstance(value, BaseModel):
        return "its defaults"
    return f"`{json.dumps(value)}`"


def model_sections(root: type[BaseModel]) -> Iterator[tuple[type[BaseModel], list[str]]]:
    """Each model reachable from `root`, in the order met, with its table's rows."""
    nested: list[type[BaseModel]] = [root]
    index = 0
    while index < len(nested):
        model = nested[index]
        index += 1
        rows: list[str] = []
        for name, field in model.model_fields.items():
            words = type_words(field.annotation, nested)
            limits = [c for c in (_constraint(m) for m in field.metadata) if c]
            if limits:
                words += f" ({', '.join(limits)})"
            rows.append(f"| `{name}` | {_cell(words)} | {_cell(_default(field))} |")
        yield model, rows


def _profile_fields() -> str:
    parts: list[str] = []
    for model, rows in model_sections(profiles.MethodProfile):
        # Its own docstring only: a model without one would show pydantic's.
        doc = inspect.cleandoc(model.__dict__.get("__doc__") or "")
        parts.append(f"### {model.__name__}\n\n{doc}\n")
        parts.append("| field | type | default |\n| --- | --- | --- |\n" + "\n".join(rows) + "\n")
    versions = ", ".join(
        f"`{v}` (`prompts/{name}`, mailbox protocol {profiles.INSTRUCTION_PROTOCOLS[v]})"
        for v, name in profiles.INSTRUCTION_FILES.items()
    )
    parts.append(
        f"`instructions` names one of the frozen instruction versions: {versions}; "
        f"`{profiles.DEFAULT_INSTRUCTIONS}` when a profile names none."
    )
    return "\n".join(parts)


# --- report definitions -------------------------------------------------------------


def _report_definitions() -> str:
    rows = ["| name | meaning |", "| --- | --- |"]
    rows += [f"| `{k}` | {_cell(v)} |" for k, v in reporter.DEFINITIONS.items()]
    rows += [
        "",
        "Why a result was not metered (`provider_usage.unmetered` in `--json`):",
        "",
        "| reason | shown as | meaning |",
        "| --- | --- | --- |",
    ]
    rows += [
        f"| `{k}` | {_cell(usage.UNMETERED_WORDS[k])} | {_cell(v)} |"
        for k, v in usage.UNMETERED_DEFINITIONS.items()
    ]
    return "\n".join(rows)


# --- launch defaults ----------------------------------------------------------------

# The options of `mailroom launch` that bound an episode or its actor.
BUDGET_OPTIONS = (
    "budget_mode",
    "max_policy_calls",
    "replan_interval",
    "max_chunk",
    "invalid_action_handling",
    "response_timeout",
    "episode_wall_time",
    "min_decisions_before_stop",
    "slots",
    "workers",
    "record",
)


def _launch_defaults() -> str:
    assert isinstance(cli_main, click.Group)
    launch = cli_main.commands["launch"]
    rows = ["| option | default | what it is |", "| --- | --- | --- |"]
    for param in launch.params:
        if isinstance(param, click.Option) and param.name in BUDGET_OPTIONS:
            default = param.default
            shown = "none" if default is None else f"`{default}`"
            rows.append(f"| `{param.opts[0]}` | {shown} | {_cell(param.help or '')} |")
    rows += ["", "An actor's limits when its profile declares none (`limits` of a profile):", ""]
    rows += ["| limit | default |", "| --- | --- |"]
    for name, field in ActorLimits.model_fields.items():
        rows.append(f"| `limits.{name}` | {'none' if field.default is None else field.default} |")
    return "\n".join(rows)


# --- architecture, instructions -----------------------------------------------------


def _architecture(repository: Path) -> str:
    text = (repository / "orchestrator" / "README.md").read_text(encoding="utf-8")
    return _demoted(text.split("\n", 1)[1])


def _instructions(version: str | None) -> str:
    if version not in profiles.INSTRUCTION_FILES:
        raise PluginError(f"unknown actor instructions version {version!r}")
    return f"```text\n{profiles.actor_instructions_template(version)}\n```"


# --- the hook's events --------------------------------------------------------------


def generators(repository: Path) -> dict[str, Callable[[str | None], str]]:
    return {
        "exit-codes": lambda _: _exit_codes(),
        "run-directory": lambda _: _run_directory(),
        "schemas": lambda _: _schemas(repository),
        "changelog": lambda _: _changelog(repository),
        "profile-fields": lambda _: _profile_fields(),
        "report-definitions": lambda _: _report_definitions(),
        "launch-defaults": lambda _: _launch_defaults(),
        "architecture": lambda _: _architecture(repository),
        "instructions": _instructions,
    }


def on_files(files: Files, config: MkDocsConfig) -> Files:
    """Every schema file, published beside the schema reference."""
    for path in schema_files(_repository(config)):
        files.append(
            File.generated(
                config, f"{SCHEMA_DIR}/{path.name}", content=path.read_text(encoding="utf-8")
            )
        )
    return files


def on_page_markdown(markdown: str, page: Page, config: MkDocsConfig, files: Files) -> str:
    known = generators(_repository(config))

    def generated(found: re.Match[str]) -> str:
        name, argument = found.group(1), found.group(2)
        if name not in known:
            raise PluginError(f"{page.file.src_uri}: unknown reference marker {name!r}")
        return known[name](argument)

    return MARKER.sub(generated, markdown)


# mkdocs-click prints click's internal marker for an option without a default (`--help`
# under click 8.3) as if it were one; the table shows nothing there instead.
UNSET_DEFAULT = re.compile(r"<code>Sentinel\.UNSET</code>")


def on_page_content(html: str, page: Page, config: MkDocsConfig, files: Files) -> str:
    return UNSET_DEFAULT.sub("", html)
