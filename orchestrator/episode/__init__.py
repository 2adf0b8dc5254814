"""One blinded episode: its settings, the runner's control loop, evidence, video."""
