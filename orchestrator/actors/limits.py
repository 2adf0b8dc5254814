"""The limits a method profile declares for its actor processes."""

from __future__ import annotations

from typing import Annotated

from pydantic import BaseModel, ConfigDict, Field

DEFAULT_MEMORY_MB = 2048  # an actor's memory ceiling unless its profile declares one


class ActorLimits(BaseModel):
    """Limits a method profile declares for its actor processes (null: not limited).

    CPU time, file size and open files are kernel resource limits of the actor process;
    `processes` caps the processes and threads of a sandboxed actor, which has a user of
    its own (so the count is exactly its own); the scratch quota is checked by the
    orchestrator on what the actor keeps in its endpoint, so a runaway actor ends as a
    typed error before the disk fills. `memory_mb` is the ceiling of the actor's memory
    cgroup (`memory_cgroup.py`): its processes and the pages of its sandbox's `/tmp` and
    `/dev/shm`; past it the kernel ends the actor (`memory_limit`).

    `expected_memory_mb` is not a limit: what one live actor is expected to hold at its
    peak (its memory cgroup's), which a worker reserves for each live episode before it
    admits another (`campaign/capacity/actor_memory.py`) until the episodes that ran say
    otherwise.
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    cpu_seconds: Annotated[int, Field(ge=1)] | None = None
    file_size_mb: Annotated[int, Field(ge=1)] | None = None
    open_files: Annotated[int, Field(ge=16)] | None = None
    processes: Annotated[int, Field(ge=8)] | None = 1024
    scratch_quota_mb: Annotated[int, Field(ge=1)] | None = 1024
    scratch_quota_files: Annotated[int, Field(ge=1)] | None = 100_000
    memory_mb: Annotated[int, Field(ge=16)] | None = DEFAULT_MEMORY_MB
    expected_memory_mb: Annotated[int, Field(ge=1, le=1 << 20)] | None = None
    # Kept of each of the actor's stdout and stderr (an agent CLI's account of its work
    # on stdout can be long); the rest is counted.
    output_mb: Annotated[int, Field(ge=1, le=1024)] = 1
    # Seconds an actor has to exit by itself once its episode closed (an agent CLI asks
    # its provider once more, and writes its account out), before it is ended.
    exit_window_s: Annotated[float, Field(ge=0, le=120)] = 1.0
