"""Simulators behind one Protocol: the shared types in `base`, LIBERO in `libero`, a
simulator-free fake in `fake`.
"""
