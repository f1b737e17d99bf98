"""The public surface of :mod:`explorer.data` (read by type checkers, and by its __init__ at run time)."""

from ._base import Task as Task
from ._digits import patchify as patchify
from ._folds import chance_level as chance_level, fold_task as fold_task
from ._images import patch_images as patch_images, valid_patches as valid_patches
from ._registry import DATA_SEED as DATA_SEED, TASKS as TASKS, load_task as load_task
from ._relations_task import relation_rules as relation_rules
from ._text import (
    SKIP_DIRS as SKIP_DIRS,
    build_corpus as build_corpus,
    corpus_files as corpus_files,
    load_text as load_text,
    windows as windows,
)
