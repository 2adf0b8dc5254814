"""Measures this machine with benchmarks run by hand: measurement, never a score.

Decision costs, detection latency, audit speed, throughput, the cluster's overhead, the
provider gateway's. The probes production code carries (the phase clock, a process's
memory) are `mailroom.measures`, below everything; the benchmarks here read them.
"""
