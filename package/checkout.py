"""Where the running code comes from, for what only a checkout has.

`CHECKOUT` is the folder above the `mailroom` package's sources: the repository in a
checkout (an editable install links each module back to it), the site-packages folder
of an installed wheel. Three things use it: the sandbox hides it from every actor, the
manifest hashes the project's source under it, and the agent CLIs that `make
agent-clis` installs live in its `agent_clis/` folder. Package data (the agents'
profiles, the prompts, the schemas) is found through `importlib.resources` instead.
"""

from __future__ import annotations

from pathlib import Path

CHECKOUT = Path(__file__).resolve().parents[1]
