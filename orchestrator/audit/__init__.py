"""Checks blinding: what is private, what an actor could read of it, failures recorded."""
