"""The parts of :mod:`benchmarks.chaos`: running commands, reading a study back, the scenarios and the record."""
