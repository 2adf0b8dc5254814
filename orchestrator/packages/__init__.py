"""The installed benchmark packages: where they keep their files, how they are imported
quietly, and LIBERO-Plus's initial states read without trusting its pickles. Below the
catalog (its builders and offline checks read the packages) and the simulators (which run
them); it imports neither."""
