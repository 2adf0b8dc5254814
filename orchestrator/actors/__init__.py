"""Starts and confines actor processes: profiles, instructions, launch, sandbox, lifetime."""
