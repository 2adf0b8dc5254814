"""mailroom: blinded evaluation of file-mailbox actors on robot-manipulation benchmarks."""

__version__ = "0.1.0"
