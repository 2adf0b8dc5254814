"""Measurement only, never a score: decision costs, detection latency, phase timing,
memory; run by hand.
"""
