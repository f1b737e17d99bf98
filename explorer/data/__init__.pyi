"""The public surface of :mod:`explorer.data` (read by type checkers, and by its __init__ at run time)."""

from ._base import Task as Task
from ._folds import chance_level as chance_level, fold_task as fold_task
from ._registry import DATA_SEED as DATA_SEED, load_task as load_task
