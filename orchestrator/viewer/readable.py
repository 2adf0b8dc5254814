"""Values as a person writes them on the viewer's pages: the one home for that.

A page never shows a Python repr (`True`, `None`, `{'a': 1}`, `178392.0`): a yes or no, a
dash where a value was not recorded, a duration in ms, s, min or h as its size asks.
These helpers return plain text; the caller still escapes it where it enters the markup,
and text an actor wrote is never passed through them (it is shown as it was written).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from enum import Enum

ABSENT = "—"  # a value that was not recorded (None, a missing key)
NONE = "none"  # an empty list or mapping: recorded, and nothing in it
NO_LIMIT = "no limit"  # a limit a run's settings leave unset (None)
# A run's confinement (records/confinement.py) in words: the mode "none" is an unconfined
# actor; a network of None is an external actor's, which the run does not control.
CONFINEMENT_WORDS = {"none": "unconfined"}
NETWORK_WORDS: dict[object, str] = {
    "none": "no network",
    "gateway": "the provider gateway only",
    "host": "the host's network",
    None: "network unknown",
}


def readable_bool(value: bool | None, *, yes: str = "yes", no: str = "no") -> str:
    """Yes or no as "yes" and "no" (or the words given), `ABSENT` for None."""
    if value is None:
        return ABSENT
    return yes if value else no


def readable_number(value: float) -> str:
    """An int as it is, a whole float without ".0", others at most 4 significant decimals."""
    if isinstance(value, bool):
        return readable_bool(value)
    if isinstance(value, int):
        return str(value)
    if math.isnan(value):
        return "not a number"
    if math.isinf(value):
        return "infinite" if value > 0 else "minus infinite"
    if value.is_integer() and abs(value) < 1e15:
        return str(int(value))
    text = f"{value:.4f}".rstrip("0").rstrip(".")
    return text if text not in ("0", "-0") else f"{value:.2g}"


def readable_value(value: object) -> str:
    """Any recorded value as text for a page: booleans as yes/no, None as `ABSENT`,
    numbers without reprs, lists joined by commas, mappings as "key: value" pairs."""
    if value is None:
        return ABSENT
    if isinstance(value, bool):
        return readable_bool(value)
    if isinstance(value, Enum):
        return readable_value(value.value)
    if isinstance(value, int | float):
        return readable_number(value)
    if isinstance(value, str):
        return value
    if isinstance(value, Mapping):
        if not value:
            return NONE
        return ", ".join(f"{readable_value(k)}: {readable_value(v)}" for k, v in value.items())
    if isinstance(value, list | tuple | set | frozenset):
        items = sorted(value, key=str) if isinstance(value, set | frozenset) else value
        return ", ".join(readable_value(v) for v in items) if items else NONE
    return str(value)


def readable_percent(rate: float | None) -> str:
    """A rate as a percentage to one decimal ("12.5%"), "n/a" where it has no denominator."""
    return "n/a" if rate is None else f"{rate:.1%}"


def readable_duration_s(seconds: float | None) -> str:
    """A duration in seconds: "850 ms", "12.3 s", "2 min 58 s", "1 h 05 min"."""
    if seconds is None:
        return ABSENT
    if math.isnan(seconds) or math.isinf(seconds):
        return readable_number(seconds)
    if seconds < 0:
        return "minus " + readable_duration_s(-seconds)
    if seconds < 1.0:
        return f"{seconds * 1000:.1f} ms" if seconds < 0.1 else f"{seconds * 1000:.0f} ms"
    if seconds < 59.95:
        return f"{seconds:.1f} s"
    whole = round(seconds)
    if whole < 3600:
        minutes, rest = divmod(whole, 60)
        return f"{minutes} min" if rest == 0 else f"{minutes} min {rest} s"
    hours, rest = divmod(whole, 3600)
    minutes = round(rest / 60)
    if minutes == 60:
        hours, minutes = hours + 1, 0
    return f"{hours} h" if minutes == 0 else f"{hours} h {minutes:02d} min"


def readable_duration_ms(ms: float | None) -> str:
    """A duration measured in milliseconds, in ms while small ("12.3 ms"), else as
    `readable_duration_s` writes it ("178392.0" ms reads "2 min 58 s")."""
    if ms is None:
        return ABSENT
    return readable_duration_s(ms / 1000.0)


def readable_limit(value: float | None, shown: Callable[[float], str] | None = None) -> str:
    """A limit that None leaves unset ("no limit"), else `shown(value)` (a number by
    default; `readable_duration_s` for a limit in seconds)."""
    if value is None:
        return NO_LIMIT
    return readable_number(value) if shown is None else shown(value)


def readable_confinement(mode: object, network: object) -> str:
    """A confinement mode and its network: "sandbox (no network)", "unconfined (the
    host's network)", "external (network unknown)"."""
    said = CONFINEMENT_WORDS.get(str(mode), readable_value(mode))
    return f"{said} ({NETWORK_WORDS.get(network, f'network {readable_value(network)}')})"
