"""The public surface of :mod:`explorer.cli` (read by type checkers, and by its __init__ at run time)."""

from ._cmd_model import SPEC_OPTIONS as SPEC_OPTIONS
from ._common import TRIAL_NAMES as TRIAL_NAMES
from ._main import main as main
