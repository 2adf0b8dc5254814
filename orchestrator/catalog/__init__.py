"""What can be run: the frozen catalog of suites and tasks, its build, cases and plans."""
