"""Benchmarks and checks that run explorer for real and record what they measured.

Run one from the repository's root as ``python -m benchmarks.NAME`` (``--help`` says what it measures); its record
is ``benchmarks/NAME.md``, to which ``--record`` appends a dated block (``end_to_end`` keeps one record per study
it is run on). :mod:`benchmarks.common` holds what they share: the machine, the load, Markdown tables and the
record block; :mod:`benchmarks.synthetic` the studies they work on without training; ``benchmarks/_chaos/`` the
parts of :mod:`benchmarks.chaos`.
"""
