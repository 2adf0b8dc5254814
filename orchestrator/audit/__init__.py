"""Blinding checks: what counts as private, scanning what an actor could read for it, and
recording the failures (disclosures, cutovers)."""
