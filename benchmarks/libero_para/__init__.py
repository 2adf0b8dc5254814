"""LIBERO-Para: paraphrased LIBERO-Goal instructions from a local copy the user declares,
run as their Goal task's scene by the LIBERO adapter."""
