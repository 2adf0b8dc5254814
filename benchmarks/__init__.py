"""The benchmark families, one folder each: a family's catalog, plans, simulator adapter,
perturbations and catalog view live together, registered with the core through the
`mailroom.benchmarks` entry-point group (`orchestrator/families/registry.py`)."""
