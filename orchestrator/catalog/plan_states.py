"""Several released initial states per task in a task-coverage plan (`--init-states`).

A family's task-coverage selection picks each task once from released state 0; this
turns it into every selected task from each of the listed states, ordered as the
canonical protocol orders its cases (every task from the first state, then every task
from the next, ...), states ascending whatever order they were given in. Only the case
list, the label and the description change; the plan's shape (`PlanCase` already has
an `init_state_index`) and its frozen schema do not. Listing state 0 alone is today's
plan, byte for byte: the plan's content, and so its hash, changes only when its cases do.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import replace

from mailroom.orchestrator.catalog.plans import (
    FIXED_INIT_STATE,
    PlanCase,
    PlanOptionError,
    Selection,
)

# How the shared once-note (`plans.ONCE_NOTE`) names the state a once-plan starts from.
ONCE_STATE_PHRASE = f"each once with released initial state {FIXED_INIT_STATE}"
MAX_LABEL = 200
MAX_DESCRIPTION = 2000


def checked_states(states: Sequence[int]) -> tuple[int, ...]:
    """The listed states, ascending: at least one, none negative, none repeated."""
    if not states:
        raise PlanOptionError("init states must name at least one released initial state")
    negative = sorted({s for s in states if s < 0})
    if negative:
        raise PlanOptionError(
            f"init {_states_are(negative)} negative: released initial states count from 0"
        )
    repeated = sorted(s for s, n in Counter(states).items() if n > 1)
    if repeated:
        raise PlanOptionError(
            f"init states repeat {format_states(repeated)}: a plan attempts each case once"
        )
    return tuple(sorted(states))


def _states_are(states: Sequence[int]) -> str:
    if len(states) == 1:
        return f"state {states[0]} is"
    return f"states {format_states(states)} are"


def format_states(states: Sequence[int]) -> str:
    """Ascending states as runs: 0,1,2,3,7 -> '0-3,7'."""
    runs: list[list[int]] = []
    for state in states:
        if runs and state == runs[-1][-1] + 1:
            runs[-1].append(state)
        else:
            runs.append([state])
    return ",".join(
        str(run[0]) if len(run) == 1 else f"{run[0]}{',' if len(run) == 2 else '-'}{run[-1]}"
        for run in runs
    )


def _in_range(
    cases: Sequence[PlanCase], states: tuple[int, ...], released: Callable[[PlanCase], int]
) -> None:
    for case in cases:
        count = released(case)
        outside = [s for s in states if s >= count]
        if outside:
            have = f"{count} released initial states (0-{count - 1})"
            if count == 1:
                have = "1 released initial state (0)"
            raise PlanOptionError(
                f"{case.suite} task {case.task_index} has {have}: "
                f"init {_states_are(outside)} out of its range"
            )


def _fitting(length: int, limit: int, *candidates: str) -> str:
    """The first candidate that keeps a text of `length` within `limit`, else the last."""
    for candidate in candidates:
        if length + len(candidate) <= limit:
            return candidate
    return candidates[-1]


def with_states(
    selection: Selection,
    states: Sequence[int],
    released: Callable[[PlanCase], int],
    title: str,
) -> Selection:
    """`selection` (each task once from state 0) with each task from each of `states`;
    `released(case)` is the number of released states its catalog entry has, `title` the
    family's name as people write it."""
    chosen = checked_states(states)
    starts = {c.init_state_index for c in selection.cases}
    if starts != {FIXED_INIT_STATE}:
        raise PlanOptionError(
            f"{title} task-coverage plans choose their own initial states: they take no init states"
        )
    _in_range(selection.cases, chosen, released)
    if chosen == (FIXED_INIT_STATE,):
        return selection
    cases = [
        case.model_copy(update={"init_state_index": state})
        for state in chosen
        for case in selection.cases
    ]
    listed = f"released initial states {format_states(chosen)}"
    counted = f"{len(chosen)} released initial states"
    label = selection.label + _fitting(
        len(selection.label), MAX_LABEL, f" from each of {listed}", f" from each of {counted}", ""
    )
    order = (
        " in turn (every task from the first state, then every task from the next, as the "
        "canonical protocol interleaves tasks)"
    )
    if ONCE_STATE_PHRASE in selection.description:
        rest = len(selection.description) - len(ONCE_STATE_PHRASE)
        words = _fitting(
            rest,
            MAX_DESCRIPTION,
            f"each once from each of {listed}{order}",
            f"each once from each of {counted}{order}",
            f"each once from each of {counted}",
        )
        description = selection.description.replace(ONCE_STATE_PHRASE, words, 1)
    else:
        description = selection.description + _fitting(
            len(selection.description),
            MAX_DESCRIPTION,
            f" Each task from each of {listed}{order}.",
            f" Each task from each of {counted}{order}.",
            "",
        )
    return replace(selection, label=label, description=description, cases=cases)
