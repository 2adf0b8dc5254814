"""A small LIBERO-Para-like copy, made from the installed LIBERO-Goal BDDL files.

Each paraphrase is a Goal task's file with its language line rewritten, in a folder per
paraphrase-type cell, as a downloaded copy lays them out; beside them, files that must be
refused: one that does not parse, one whose scene moved, one whose goal changed.
"""

from __future__ import annotations

import re
from pathlib import Path

from mailroom.benchmarks.libero.catalog import load_catalog
from mailroom.benchmarks.libero.package_dir import libero_package_dir

REVISION = "d306f66f8b441cad1155b21a3f69e440079c81c9"
LANGUAGE = re.compile(r"\(:language [^)]*\)")
CELLS = {
    "action_synonym": "kindly {}",
    "object_descriptive": "{} please, carefully",
}


def goal_bddl(task_index: int) -> str:
    entry = load_catalog().entry("libero_goal", task_index)
    return (libero_package_dir() / entry.bddl_path).read_text(encoding="utf-8")


def paraphrased(task_index: int, language: str) -> str:
    text = goal_bddl(task_index)
    assert LANGUAGE.search(text), "a Goal BDDL file has a language line"
    return LANGUAGE.sub(f"(:language {language})", text, count=1)


def make_para_copy(root: Path, goal_tasks: tuple[int, ...] = (0, 1, 2)) -> dict[str, str]:
    """Write the copy; return each runnable file's path in it and its instruction."""
    root.mkdir(parents=True, exist_ok=True)
    (root / "REVISION").write_text(REVISION + "\n", encoding="utf-8")
    expected: dict[str, str] = {}
    for cell, template in CELLS.items():
        for task in goal_tasks:
            base = load_catalog().entry("libero_goal", task).instruction
            language = template.format(base)
            path = f"{cell}/goal_{task}.bddl"
            (root / cell).mkdir(exist_ok=True)
            (root / path).write_text(paraphrased(task, language), encoding="utf-8")
            expected[path] = language
    broken = root / "broken"
    broken.mkdir()
    (broken / "unbalanced.bddl").write_text(paraphrased(0, "open it")[:-40], encoding="utf-8")
    moved = paraphrased(1, "put it there")
    numbers = re.findall(r"-?\d+\.\d+", moved)
    assert numbers, "a Goal BDDL file places things with numbers"
    (broken / "moved_scene.bddl").write_text(
        moved.replace(numbers[0], str(float(numbers[0]) + 0.1), 1), encoding="utf-8"
    )
    goal_changed = paraphrased(2, "do the thing")
    goal_start = goal_changed.index("(:goal")
    head, tail = goal_changed[:goal_start], goal_changed[goal_start:]
    (broken / "changed_goal.bddl").write_text(
        head + tail.replace("(And", "(And (Open wooden_cabinet_1_top_region)", 1),
        encoding="utf-8",
    )
    return expected
