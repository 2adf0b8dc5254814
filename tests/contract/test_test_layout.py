"""The tests are laid out by cost, then by room (tests/conftest.py): each file lives in
one folder, its marker is that folder's and no file sets one itself, and `make
test-fast` runs exactly the quick folders."""

from __future__ import annotations

import re
import tomllib

from conftest import REPO, TEST_FOLDERS, TESTS

QUICK = ("unit", "contract")


def test_every_test_file_lives_in_one_of_the_folders() -> None:
    files = sorted(TESTS.rglob("test_*.py"))
    assert len(files) > 100
    for path in files:
        folder = path.relative_to(TESTS).parts[0]
        assert folder in TEST_FOLDERS, path


def test_a_marker_is_its_folder_s_and_set_nowhere_else() -> None:
    config = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))
    declared = [m.split(":")[0] for m in config["tool"]["pytest"]["ini_options"]["markers"]]
    assert sorted(declared) == sorted(TEST_FOLDERS)
    cost = re.compile(rf"pytest\.mark\.(?:{'|'.join(TEST_FOLDERS)}|slow)\b")
    for path in TESTS.rglob("test_*.py"):
        assert not cost.search(path.read_text(encoding="utf-8")), path


def test_make_test_fast_runs_the_quick_folders_and_make_test_everything() -> None:
    makefile = (REPO / "Makefile").read_text(encoding="utf-8")
    fast = re.search(r"^test-fast:.*\n\t(.+)$", makefile, re.MULTILINE)
    assert fast is not None
    assert fast.group(1).split()[-len(QUICK) :] == [f"tests/{f}" for f in QUICK]
    full = re.search(r"^test:.*\n\t(.+)$", makefile, re.MULTILINE)
    assert full is not None and "tests/" not in full.group(1) and " -m " not in full.group(1)


def test_every_file_named_costliest_exists() -> None:
    """`make test` hands these out first: a renamed one would silently start late."""
    from conftest import COSTLIEST_FILES

    assert [f for f in COSTLIEST_FILES if not (TESTS / f).is_file()] == []
