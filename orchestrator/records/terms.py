"""The terms a run's settings are declared and recorded in: how an episode's control
budget is counted (`BudgetMode`) and what an invalid action does (`InvalidActionHandling`).

The settings themselves and their checks are `episode/settings.py`; a result document
records these terms as they were (`records/result.py`, `SettingsRecord`).
"""

from __future__ import annotations

from typing import Literal

BudgetMode = Literal["horizon", "decisions"]
InvalidActionHandling = Literal["terminal", "feedback"]
