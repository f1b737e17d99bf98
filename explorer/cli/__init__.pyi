"""The public surface of :mod:`explorer.cli` (read by type checkers, and by its __init__ at run time)."""

from ._main import main as main
