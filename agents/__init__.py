"""The agents mailroom ships, one folder each: a method profile (`profile.json`) and
whatever of its own it needs beside it (a wrapper, an install spec, a trace parser).

Found as package data by `mailroom.orchestrator.actors.profiles` (an installed wheel
finds them too); nothing in the orchestrator imports an agent's module by name.
"""
