"""Tasks: every loader returns a :class:`Task` with fixed train/val/test splits.

``load_task("digits")``, ``load_task("mnist", patch=7)``, ``load_task("relations", n_relations=4)``,
``load_task("text", context=128)`` (a byte-level language model on the Python standard library's source),
``load_task("path/to/data.npz")`` or a function of the user's: ``load_task("mypkg.data:load")`` or
``load_task("path/to/data.py:load")`` (:mod:`explorer.data._user_task`). An ``.npz`` file or a function
returning images takes ``patch`` (and ``layout``) to cut them into patches.
"""

from __future__ import annotations

import inspect
import os
from collections.abc import Callable
from typing import Any

from explorer.data._base import Task
from explorer.data._digits import load_digits_task
from explorer.data._mnist import load_mnist
from explorer.data._npz import load_npz
from explorer.data._relations_task import load_relations
from explorer.data._text import load_text
from explorer.data._user_task import load_code_task
from explorer.errors import ConfigError
from explorer.hooks import REFERENCE_FORM, is_reference

DATA_SEED = 0  # the seed a study loads its task with: the data and the fixed splits it cuts

TASKS = ("digits", "mnist", "relations", "text")  # built-in names; a path ending in .npz is a user file
_LOADERS: dict[str, Callable[..., Task]] = {
    "digits": load_digits_task,
    "mnist": load_mnist,
    "relations": load_relations,
    "text": load_text,
}


def _options(loader: Callable[..., Task]) -> list[str]:
    """The keyword options a loader accepts besides ``seed``."""
    params = inspect.signature(loader).parameters
    return [p for p in params if p not in ("seed", "path")]


def load_task(name: str | os.PathLike[str], *, seed: int = DATA_SEED, **options: Any) -> Task:
    """Load a built-in task by name, a user ``.npz`` file by path or a user function by reference; ``seed``
    fixes data and splits (a user function that takes ``seed`` gets it too)."""
    if isinstance(seed, bool) or not isinstance(seed, int) or seed < 0:
        raise ConfigError(f"the task seed must be a non-negative integer, got {seed!r}.")
    text = os.fspath(name)
    if text.endswith(".npz"):
        loader: Callable[..., Task] = load_npz
        label = ".npz files"
    elif text in _LOADERS:
        loader, label = _LOADERS[text], f"task {text!r}"
    elif is_reference(text):
        return load_code_task(text, seed=seed, **options)  # its options are the function's parameters
    else:
        raise ConfigError(
            f"unknown task {text!r}; choose one of {', '.join(TASKS)}, give a path ending in .npz, or name "
            f"your own function as {REFERENCE_FORM}."
        )
    allowed = _options(loader)
    unknown = sorted(set(options) - set(allowed))
    if unknown:
        raise ConfigError(
            f"unknown option(s) {', '.join(unknown)} for {label}; allowed: {', '.join(allowed) or 'none'}."
        )
    if loader is load_npz:
        return load_npz(text, seed=seed, **options)
    return loader(seed=seed, **options)
