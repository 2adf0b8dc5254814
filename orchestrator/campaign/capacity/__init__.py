"""How many live episodes a launch and each of its workers hold: decided before a launch
in one place (`decide.py`: `decide_capacity`), and admitted by each worker as it runs
(`memory.py`, `service_load.py`)."""
