"""Measurement, never a score: the benchmarks run by hand (decision costs, detection
latency, audit speed), and the two probes production code carries, off or near-free:
the phase clock and a process's peak memory.
"""
