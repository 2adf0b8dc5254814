"""orchestrator/README.md's map cannot go stale: every room of the package has its row,
every module of a room is named in it, every module named there exists, and the layer
picture lists the rooms pyproject.toml's contract checks."""

from __future__ import annotations

import re
import tomllib

from conftest import REPO

ORCHESTRATOR = REPO / "orchestrator"
README = (ORCHESTRATOR / "README.md").read_text("utf-8")
ROW = re.compile(r"^\| `([a-z_]+)/` \|(.*)$", re.MULTILINE)
MODULE = re.compile(r"`((?:[a-z_0-9]+/)*[a-z_0-9]+\.py)`")


def _rooms() -> list[str]:
    return sorted(
        p.name for p in ORCHESTRATOR.iterdir() if p.is_dir() and (p / "__init__.py").is_file()
    )


def test_every_room_and_module_is_on_the_map_and_nothing_else() -> None:
    rows = {m.group(1): m.group(2) for m in ROW.finditer(README)}
    assert sorted(rows) == _rooms()
    for room, row in rows.items():
        folder = ORCHESTRATOR / room
        # A subpackage's modules by their path in the room (`capacity/memory.py`); a path
        # into another room (`records/terms.py`) is a pointer, not this room's module.
        modules = {
            f.relative_to(folder).as_posix()
            for f in folder.rglob("*.py")
            if f.name != "__init__.py"
        }
        inner = {p.parent.relative_to(folder).as_posix() for p in folder.rglob("*/__init__.py")}
        named = {n for n in MODULE.findall(row) if "/" not in n or n.split("/")[0] in inner}
        assert not modules - named, f"{room}/ modules not on the map: {sorted(modules - named)}"
        assert not named - modules, (
            f"{room}/ names modules that do not exist: {sorted(named - modules)}"
        )


def test_the_layer_picture_lists_the_contracts_rooms() -> None:
    contracts = tomllib.loads((REPO / "pyproject.toml").read_text("utf-8"))
    (rooms,) = [c for c in contracts["tool"]["importlinter"]["contracts"] if c["id"] == "rooms"]
    layered = sorted(r.strip() for line in rooms["layers"] for r in line.split("|"))
    assert layered == _rooms()
    picture = README[
        README.index("```\nmailroom.agents") : README.index(
            "```", README.index("```\nmailroom.agents") + 3
        )
    ]
    pictured = sorted(
        set(re.findall(r"\b([a-z_]+)/", picture)) - {"agents", "benchmarks", "mailbox"}
    )
    assert pictured == _rooms()


def test_every_family_folder_names_each_of_its_modules() -> None:
    """benchmarks/README.md lists every family folder, and each folder's README names
    every module in it and nothing that is not there."""
    benchmarks = REPO / "benchmarks"
    folders = sorted(p.name for p in benchmarks.iterdir() if (p / "__init__.py").is_file())
    index = (benchmarks / "README.md").read_text("utf-8")
    assert sorted(re.findall(r"^\| `([a-z_]+)/` \|", index, re.MULTILINE)) == folders
    for folder in folders:
        text = (benchmarks / folder / "README.md").read_text("utf-8")
        modules = {f.name for f in (benchmarks / folder).glob("*.py") if f.name != "__init__.py"}
        assert set(MODULE.findall(text)) == modules, folder
