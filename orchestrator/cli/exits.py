"""Every exit code of `mailroom`, one meaning each (README.md lists them for users)."""

from __future__ import annotations

EXIT_OK = 0
EXIT_FAILED = 1  # `check-response`: rejected; `replay`: an attempt did not reproduce
EXIT_USAGE = 2  # click's own code for a usage error; a refused confinement or kernel limit
EXIT_EPISODE_ERROR = 3  # `demo`: the episode ended in a typed error
EXIT_INCOMPLETE = 4  # a run or export left something out (unattempted, errored, corrupt)
EXIT_CONFLICT = 5  # a conflicting manifest, or a run already in use
EXIT_LEAKS = 6  # the audit found private context where an actor could read it
EXIT_INFRASTRUCTURE = 7  # the run directory failed (full, read-only)
EXIT_UNVERIFIABLE = 8  # the audit could not read everything it must check
EXIT_CLUSTER = 9  # the cluster cannot run the launch (Ray missing or unreachable, no room)
EXIT_INTERRUPTED = 130  # `launch`/`resume` stopped by Ctrl-C (SIGINT): 128 + 2, as shells say
EXIT_TERMINATED = 143  # `launch`/`resume` stopped by SIGTERM: 128 + 15
