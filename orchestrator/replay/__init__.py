"""Re-proving a run: `mailroom replay` re-executes each recorded episode and compares."""
