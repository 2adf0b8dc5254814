"""Blinding checks: scanning what an actor could read for private identifiers, and disclosures."""
