"""What an actor keeps in its endpoint, counted with bounded work.

`endpoint_usage` counts every entry the actor made under its endpoint: what is in
`scratch/` and `inbox/`, and anything it put beside them. `outbox/` (the
orchestrator's) is left out, and `scratch/` and `inbox/` themselves are not counted
(what is in them is). It
reads metadata only, through the endpoint's held descriptor; it never follows a
symlink, never crosses onto another filesystem, and stops after `max_entries` entries
or `max_depth` folder levels, reporting `truncated` (every figure is then a lower
bound). At most `max_depth + 1` descriptors are open at once.

Checking a quota: measure with `max_entries` one above the quota's entry count, and
treat `truncated` as over quota.
"""

from __future__ import annotations

import os
import stat
from dataclasses import dataclass, field

from .endpoint import Endpoint
from .held_directories import DIR_FLAGS, Identity

DEFAULT_MAX_DEPTH = 32
BLOCK_BYTES = 512  # st_blocks is counted in 512-byte units whatever the filesystem


@dataclass(frozen=True)
class Usage:
    """Entries and bytes under the endpoint (outbox/ excluded).

    `files`: entries of every kind (files, folders, symlinks, fifos...), each name once.
    `bytes`: apparent size (`st_size`) of regular files, each inode once.
    `allocated_bytes`: space actually allocated (`st_blocks * 512`) to every entry, each
    inode once: a sparse file is large in `bytes` and small here.
    `truncated`: the count stopped at a bound; the figures are lower bounds.
    """

    files: int
    bytes: int
    allocated_bytes: int
    truncated: bool


@dataclass
class _Tally:
    max_entries: int
    max_depth: int
    device: int
    files: int = 0
    bytes: int = 0
    allocated: int = 0
    truncated: bool = False
    seen: set[Identity] = field(default_factory=set)

    def add(self, st: os.stat_result) -> None:
        self.files += 1
        inode = (st.st_dev, st.st_ino)
        if inode in self.seen:
            return  # another name of a file already counted
        self.seen.add(inode)
        if stat.S_ISREG(st.st_mode):
            self.bytes += st.st_size
        self.allocated += st.st_blocks * BLOCK_BYTES


# How the endpoint's own top-level folders are treated: by identity when held (whatever
# they are called now), by name otherwise.
_SKIP, _ENTER = "skip", "enter"
TopRules = dict[Identity | str, str]


def _top_rule(rules: TopRules, name: str, st: os.stat_result) -> str | None:
    return rules.get((st.st_dev, st.st_ino), rules.get(name))


def _walk(dir_fd: int, depth: int, tally: _Tally, rules: TopRules) -> None:
    """Count the entries of the folder held by `dir_fd`, then descend into its folders.

    `rules` apply to this folder's own entries only (the endpoint root's).
    """
    folders: list[str] = []
    try:
        with os.scandir(dir_fd) as entries:
            for entry in entries:
                try:
                    st = entry.stat(follow_symlinks=False)
                except OSError:
                    continue  # gone since the listing
                rule = _top_rule(rules, entry.name, st) if rules else None
                if rule == _SKIP:
                    continue
                if rule != _ENTER:
                    if tally.files >= tally.max_entries:
                        tally.truncated = True
                        return
                    tally.add(st)
                if stat.S_ISDIR(st.st_mode) and st.st_dev == tally.device:
                    folders.append(entry.name)
    except OSError:
        return  # unlistable: nothing more to count here
    for name in folders:
        if depth >= tally.max_depth:
            tally.truncated = True
            return
        try:
            fd = os.open(name, DIR_FLAGS, dir_fd=dir_fd)  # replaced by a symlink: refused
        except OSError:
            continue
        try:
            if os.fstat(fd).st_dev == tally.device:
                _walk(fd, depth + 1, tally, {})
        finally:
            os.close(fd)
        if tally.truncated:
            return


def endpoint_usage(
    endpoint: Endpoint, max_entries: int, *, max_depth: int = DEFAULT_MAX_DEPTH
) -> Usage:
    """Entries and bytes the actor keeps under `endpoint` (not `outbox/`), bounded.

    Reads the held endpoint directory when there is one (the outbox is then told apart
    by its identity, whatever its name now), else opens the endpoint root by path.
    """
    if max_entries < 0 or max_depth < 0:
        raise ValueError("bounds must not be negative")
    dirs = endpoint.dirs
    rules: TopRules
    if dirs is not None:
        root_fd, owned = dirs.root_fd, False
        rules = {dirs.identity("outbox"): _SKIP}
        rules.update({dirs.identity(name): _ENTER for name in ("inbox", "scratch")})
    else:
        root_fd, owned = os.open(endpoint.root, DIR_FLAGS), True
        rules = {"outbox": _SKIP, "inbox": _ENTER, "scratch": _ENTER}
    try:
        tally = _Tally(max_entries, max_depth, device=os.fstat(root_fd).st_dev)
        _walk(root_fd, 1, tally, rules)
    finally:
        if owned:
            os.close(root_fd)
    return Usage(tally.files, tally.bytes, tally.allocated, tally.truncated)
