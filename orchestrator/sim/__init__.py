"""Simulators behind one Protocol (`base`): LIBERO's adapter (`libero`) and a fake (`fake`)."""
