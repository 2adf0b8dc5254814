"""Benchmark families behind one registry: what a suite means (catalog side) and what runs
it (simulator side); LIBERO, LIBERO-PRO, LIBERO-Plus and LIBERO-Para are its built-in
entries, and others register through the `mailroom.benchmarks` entry-point group."""
