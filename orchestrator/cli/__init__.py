"""The `mailroom` command line: one thin file per command group, shared options, exit codes."""
