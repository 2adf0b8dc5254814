"""How many numbers an action vector holds in version 1 of the protocol: its frozen
response and observation schemas fix 7. The parser checks a response's actions against
it and the wire models carry it; what each component means is the family's
(`ActionSpec.layout`, published in each observation's `action_spec.layout`)."""

from __future__ import annotations

ACTION_DIMENSION = 7
