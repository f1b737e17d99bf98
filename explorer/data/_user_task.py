"""A task from the user's own code: ``[task] name = "mypkg.data:load"`` or ``"path/to/data.py:load"``.

The function (found by :func:`explorer.hooks.resolve`) is called with the task's options as keyword
arguments, and with ``seed`` too when it takes one. It returns ``X`` and ``y`` and optionally ``X_val``/``y_val``
and ``X_test``/``y_test``, as numpy arrays or torch tensors, in a mapping (a dict, or an ``np.load`` result) or as
a :class:`Task` (its splits are taken as given). Whatever it returns passes the checks an ``.npz`` file passes
(:func:`explorer.data._npz.task_from_arrays`): shapes, dtypes, ranges, NaN/inf, class coverage, the
seeded stratified split of what is missing. Two options are explorer's own, never passed to the function:
``patch`` (cut image arrays into patches, :mod:`explorer.data._images`) and ``layout`` (``hwc`` or
``chw`` for 4-D images). Anything it raises is one :class:`DataError` naming the function.
"""

from __future__ import annotations

import inspect
from collections.abc import Mapping
from typing import Any

import numpy as np
import torch

from explorer.data._base import Task
from explorer.data._npz import ALLOWED_KEYS, arrays_to_task
from explorer.errors import ConfigError, DataError, ExplorerError
from explorer.hooks import resolve

IMAGE_OPTIONS = ("patch", "layout")  # explorer's own options of a user task (never passed to the function)


def _array(value: Any, key: str, ref: str) -> np.ndarray:
    if isinstance(value, torch.Tensor):
        return value.detach().cpu().numpy()
    try:
        array = np.asarray(value)
    except (TypeError, ValueError) as exc:
        raise DataError(
            f"task {ref!r} returned {key} that is not an array ({exc}); return numpy arrays."
        ) from None
    if array.dtype == object:
        raise DataError(
            f"task {ref!r} returned {key} of Python objects ({type(value).__name__}); return numeric numpy "
            "arrays or tensors."
        )
    return array


def _arrays(result: Any, ref: str) -> dict[str, np.ndarray]:
    """The named arrays in what the function returned."""
    if isinstance(result, Task):
        if result.kind != "classification":
            raise DataError(f"task {ref!r} returned a {result.kind} Task; a task from code must classify.")
        pairs = {"": result.train, "_val": result.val, "_test": result.test}
        raw = {f"{a}{s}": v for s, (X, y) in pairs.items() for a, v in (("X", X), ("y", y))}
    elif isinstance(result, Mapping) or hasattr(result, "files"):  # a dict, or what np.load returns
        raw = {str(k): result[k] for k in (result.files if hasattr(result, "files") else result)}
    else:
        raise DataError(
            f"task {ref!r} returned {type(result).__name__}; return a dict with 'X' and 'y' (arrays or tensors), "
            "or a Task."
        )
    unknown = sorted(set(raw) - set(ALLOWED_KEYS))
    if unknown:
        raise DataError(
            f"task {ref!r} returned unknown key(s) {unknown}; keep only {', '.join(ALLOWED_KEYS)}."
        )
    for key in ("X", "y"):
        if key not in raw:
            raise DataError(f"task {ref!r} returned no {key!r}; return a dict with 'X' and 'y'.")
    return {k: _array(v, k, ref) for k, v in raw.items()}


def _call(fn: Any, ref: str, seed: int, options: Mapping[str, Any]) -> Any:
    params = inspect.signature(fn).parameters
    free = any(p.kind == p.VAR_KEYWORD for p in params.values())
    unknown = sorted(k for k in options if k not in params and not free)
    if unknown:
        takes = [p for p in params if params[p].kind not in (params[p].VAR_POSITIONAL,)]
        raise ConfigError(
            f"task option(s) {', '.join(unknown)} are not parameters of {ref!r} (it takes "
            f"{', '.join(takes) or 'none'}; explorer's own: {', '.join(IMAGE_OPTIONS)})."
        )
    kwargs = dict(options)
    if "seed" in params or free:
        kwargs.setdefault("seed", seed)
    try:
        return fn(**kwargs)
    except ExplorerError:
        raise
    except Exception as exc:
        raise DataError(
            f"task {ref!r} raised {type(exc).__name__}: {exc}; fix the loader (explorer -v shows the traceback)."
        ) from exc


def load_code_task(ref: str, *, seed: int = 0, **options: Any) -> Task:
    """Call the task function ``ref`` names and check what it returns (see the module docstring)."""
    fn = resolve(ref, "task")
    own = {k: options.pop(k) for k in IMAGE_OPTIONS if k in options}
    if "layout" in own and "patch" not in own:
        raise ConfigError("task option layout describes images; give patch = P with it.")
    arrays = _arrays(_call(fn, ref, seed, options), ref)
    target, _, attr = ref.rpartition(":")
    name = f"{target.rsplit('/', 1)[-1].removesuffix('.py').rsplit('.', 1)[-1]}:{attr}"
    return arrays_to_task(name, arrays, seed, f"user task {ref}", **own)
