"""Packages, found rather than listed: each top-level folder maps into `mailroom`.

The transport lives in `mailbox/` yet installs as `mailroom.mailbox`, so it never shadows
the standard library's `mailbox` module; everything else (metadata, dependencies,
package data) is in pyproject.toml.
"""

from setuptools import find_packages, setup

FOLDERS = {
    "mailroom": "package",
    "mailroom.mailbox": "mailbox",
    "mailroom.orchestrator": "orchestrator",
    "mailroom.schemas": "schemas",
    "mailroom.prompts": "prompts",
    "mailroom.agents": "agents",
    "mailroom.benchmarks": "benchmarks",
}


def _packages() -> list[str]:
    found = list(FOLDERS)
    for name, folder in FOLDERS.items():
        found += [
            f"{name}.{sub}" for sub in find_packages(folder) if f"{name}.{sub}" not in FOLDERS
        ]
    return sorted(found)


setup(package_dir=FOLDERS, packages=_packages())
