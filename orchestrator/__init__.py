"""The trusted side: simulators, episodes, campaigns, results and the CLI (see README.md)."""
