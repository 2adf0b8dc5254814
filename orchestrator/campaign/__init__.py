"""Many episodes: the coordinator and its workers, the run directory, the manifest,
interrupted attempts.
"""
