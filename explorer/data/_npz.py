"""User data from a ``.npz`` file, checked and split into a :class:`Task`.

The file holds ``X`` (integer tokens ``[n, seq]`` or numeric features ``[n, seq, features]``) and ``y``
(integer labels ``[n]``), optionally ``X_val``/``y_val`` and ``X_test``/``y_test``. A missing split is carved
out of the training arrays by a seeded, stratified draw: 15% each, so a file with only ``X``/``y`` becomes
70/15/15. It is loaded with ``allow_pickle=False``: a file holding Python objects is refused, never unpickled.
Every problem is a one-sentence :class:`DataError` naming the fix. :func:`task_from_arrays` is the same check
and split for arrays already in memory (the digits task uses it).

Sizes follow from the values: the vocabulary is the largest token id + 1 and the classes the largest label + 1,
so both are bounded before anything is built (token ids below :data:`explorer.limits.VOCAB`, labels below
:data:`explorer.limits.CLASSES`, each raised by its environment variable: a stray id of 2**40 would otherwise
ask for a 140 TB embedding), and labels must be dense enough that most of those classes exist (:data:`MIN_CLASS_COVERAGE`): labels {0, 1, 5000} would train a
5001-way classifier for three classes. Both are fixed by renumbering with ``np.unique(..., return_inverse=True)``.
"""

from __future__ import annotations

import math
import zipfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np
import torch

from explorer.data._base import Task
from explorer.data._images import patch_images, with_image
from explorer.errors import ConfigError, DataError
from explorer.layout import InputSpec
from explorer.limits import CLASSES, SEQ_LEN, VOCAB, check_memory

ALLOWED_KEYS = ("X", "y", "X_val", "y_val", "X_test", "y_test")
HOLDOUT = 0.15  # fraction of the training arrays carved out for each missing split
MIN_TRAIN = 10  # training examples needed at least
MIN_EVAL = 2  # validation and test examples needed at least
MIN_CLASS_COVERAGE = 0.5  # at least this share of the classes 0..max label must occur in the data

Split = tuple[np.ndarray, np.ndarray]


def load_npz(path: str | Path, *, seed: int = 0, patch: int | None = None, layout: str = "hwc") -> Task:
    """Read, check and split a user ``.npz`` file; the task is named after the file's stem. With ``patch`` its
    ``X`` arrays are images, cut into patches (:mod:`explorer.data._images`)."""
    path = Path(path)
    arrays = _read(path)
    for key in ("X", "y"):
        if key not in arrays:
            raise DataError(f"{path.name} has no array {key!r}; save it with numpy.savez(path, X=X, y=y).")
    if patch is None and layout != "hwc":
        raise ConfigError("task option layout describes images; give patch = P with it.")
    return arrays_to_task(path.stem, arrays, seed, f"user data {path.name}", patch=patch, layout=layout)


def arrays_to_task(
    name: str, arrays: Mapping[str, np.ndarray], seed: int, description: str, **image: Any
) -> Task:
    """Named arrays (``X``, ``y``, optional ``X_val``...) -> a checked Task; with ``patch`` the ``X`` arrays are
    images, cut into patches first (``layout`` says how 4-D images are laid out)."""
    arrays = dict(arrays)
    shape = None
    if image.get("patch") is not None:
        for key in ("X", "X_val", "X_test"):
            if key in arrays:
                arrays[key], shape = patch_images(
                    arrays[key], image["patch"], image.get("layout", "hwc"), key
                )
    elif arrays["X"].ndim == 4:
        raise DataError(
            f"X has shape {arrays['X'].shape}: 4-D arrays are images; cut them into patches with the task option "
            "patch = P (and layout = 'chw' for [n, C, H, W])."
        )
    extra = {}
    for split in ("val", "test"):
        xk, yk = f"X_{split}", f"y_{split}"
        if (xk in arrays) != (yk in arrays):
            have, lack = (xk, yk) if xk in arrays else (yk, xk)
            raise DataError(f"{name} has {have!r} but not {lack!r}; give both or neither.")
        if xk in arrays:
            extra[split] = (arrays[xk], arrays[yk])
    task = task_from_arrays(name, arrays["X"], arrays["y"], seed=seed, description=description, **extra)
    return task if shape is None else with_image(task, shape, int(image["patch"]))


def declared_shapes(path: Path) -> dict[str, tuple[tuple[int, ...], np.dtype]]:
    """The shape and dtype each array of an ``.npz`` declares in its header, read without loading any data."""
    out = {}
    try:
        with zipfile.ZipFile(path) as z:
            unknown = sorted({m.removesuffix(".npy") for m in z.namelist()} - set(ALLOWED_KEYS))
            if unknown:  # before any header is read: an archive of a million members is refused at once
                raise DataError(
                    f"{path.name} has unknown array(s) {unknown[:5]}; keep only {', '.join(ALLOWED_KEYS)}."
                )
            for member in z.namelist():
                key = member.removesuffix(".npy")
                with z.open(member) as f:
                    version = np.lib.format.read_magic(f)
                    read = (
                        np.lib.format.read_array_header_1_0
                        if version == (1, 0)
                        else np.lib.format.read_array_header_2_0
                    )
                    shape, _, dtype = read(f)
                out[key] = (tuple(int(n) for n in shape), np.dtype(dtype))
    except (OSError, ValueError, EOFError, TypeError, SyntaxError, zipfile.BadZipFile) as e:
        raise DataError(
            f"{path.name} could not be read as .npz ({e}); re-save it with numpy.savez."
        ) from None
    return out


def check_array_sizes(shapes: dict[str, tuple[tuple[int, ...], np.dtype]], source: str) -> int:
    """The bytes a task built from arrays of these shapes takes (the arrays, then int64/float32 tensors and the
    split copies), if within explorer.limits; for an ``.npz`` header or arrays already in memory alike.
    Positions per example (``X``'s second axis) are bounded by ``SEQ_LEN``."""
    total = 0
    for key, (shape, dtype) in shapes.items():
        if key.startswith("X") and len(shape) >= 2:
            SEQ_LEN.check(shape[1], f"the positions per example of {key} in {source}", "cut the sequences")
        elements = math.prod(shape)
        total += elements * dtype.itemsize + 2 * elements * 8
    return check_memory(total, f"the arrays of {source}", "give fewer or shorter examples")


def _read(path: Path) -> dict[str, np.ndarray]:
    if not path.exists():
        raise DataError(f"{path}: no such file; check the path to your .npz file.")
    if not path.is_file():
        raise DataError(f"{path} is not a file; give the path of a .npz file.")
    if not zipfile.is_zipfile(path):
        raise DataError(
            f"{path} is not an .npz archive (not a zip file); save your arrays with numpy.savez(path, X=X, y=y)."
        )
    check_array_sizes(declared_shapes(path), path.name)  # from the headers: no data is read before this
    arrays = {}
    try:
        with np.load(path, allow_pickle=False) as npz:
            unknown = sorted(set(npz.files) - set(ALLOWED_KEYS))
            if unknown:
                raise DataError(
                    f"{path.name} has unknown array(s) {unknown}; keep only {', '.join(ALLOWED_KEYS)}."
                )
            for key in npz.files:
                try:
                    arrays[key] = npz[key]
                except ValueError as e:
                    if "pickle" not in str(e) and "Object arrays" not in str(e):
                        raise
                    raise DataError(
                        f"{path.name}: array {key!r} holds Python objects (pickled data), which are refused "
                        f"for safety; save plain numeric arrays (e.g. X.astype(np.int64))."
                    ) from None
    except DataError:
        raise
    except (OSError, ValueError, EOFError, zipfile.BadZipFile) as e:
        raise DataError(
            f"{path.name} could not be read as .npz ({e}); re-save it with numpy.savez."
        ) from None
    return arrays


def _check_split(name: str, X: np.ndarray, y: np.ndarray) -> None:
    """Shape, dtype and value checks of one split (``name`` is "", "_val" or "_test")."""
    xk, yk = f"X{name}", f"y{name}"
    if y.ndim != 1:
        raise DataError(
            f"{yk} must be 1-D labels [n], got shape {y.shape}; flatten it with {yk}.reshape(-1)."
        )
    if not np.issubdtype(y.dtype, np.integer):
        raise DataError(
            f"{yk} has dtype {y.dtype}; labels must be integers, convert with {yk}.astype(np.int64)."
        )
    if X.ndim not in (2, 3):
        raise DataError(
            f"{xk} has shape {X.shape}; it must be integer tokens [n, seq] or float features [n, seq, features]."
        )
    if 0 in X.shape:
        raise DataError(f"{xk} has shape {X.shape} with an empty dimension; every size must be at least 1.")
    if len(X) != len(y):
        raise DataError(
            f"{xk} has {len(X)} examples but {yk} has {len(y)} labels; give one label per example."
        )
    if X.ndim == 2:
        if not np.issubdtype(X.dtype, np.integer):
            raise DataError(
                f"{xk} is 2-D, so it is read as tokens, but has dtype {X.dtype}; tokens must be integers "
                f"({xk}.astype(np.int64)), or give features as [n, seq, features]."
            )
        if X.min() < 0:
            raise DataError(
                f"{xk} has negative token ids (min {X.min()}); token ids must be 0..vocab_size-1."
            )
        if X.max() >= VOCAB.value():
            raise DataError(
                f"{xk} has token id {X.max()}, but token ids must be below {VOCAB.value():,} (the vocabulary is the "
                f"largest id + 1; {VOCAB.env} raises it); renumber them with np.unique(X, return_inverse=True) "
                "(one mapping for every split)."
            )
    else:
        if not (np.issubdtype(X.dtype, np.number) or X.dtype == bool) or np.iscomplexobj(X):
            raise DataError(
                f"{xk} has dtype {X.dtype}; features must be real numbers ({xk}.astype(np.float32))."
            )
        if not np.isfinite(X).all():
            first = int(np.flatnonzero(~np.isfinite(X).reshape(len(X), -1).all(axis=1))[0])
            raise DataError(
                f"{xk} contains NaN or inf (first in example {first}); remove or impute those values."
            )
    if len(y) and y.min() < 0:
        raise DataError(
            f"{yk} has negative labels (min {y.min()}); labels must be 0..n_classes-1 "
            f"(remap with np.unique({yk}, return_inverse=True))."
        )
    if len(y) and y.max() >= CLASSES.value():
        raise DataError(
            f"{yk} has label {y.max()}, but labels must be below {CLASSES.value():,} (the classes are the largest "
            f"label + 1; {CLASSES.env} raises it); renumber them 0..n_classes-1 with np.unique(y, "
            "return_inverse=True)."
        )


def split_indices(
    y: np.ndarray, seed: int, n_val: int, n_test: int
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Seeded, stratified ``(train, val, test)`` index arrays of ``y`` with the given val/test sizes."""
    from sklearn.model_selection import train_test_split  # a second of imports, for the processes that split

    idx = np.arange(len(y))
    try:
        rest, test = (
            train_test_split(idx, test_size=n_test, stratify=y, random_state=seed)
            if n_test
            else (idx, idx[:0])
        )
        train, val = (
            train_test_split(rest, test_size=n_val, stratify=y[rest], random_state=seed)
            if n_val
            else (rest, rest[:0])
        )
    except ValueError:
        counts = np.bincount(y)
        rare = int(np.flatnonzero(counts == counts[counts > 0].min())[0])
        raise DataError(
            f"cannot split {len(y)} examples of {np.count_nonzero(counts)} classes into stratified splits "
            f"(class {rare} has {counts[rare]} example(s)); add examples or give X_val/y_val and X_test/y_test."
        ) from None
    return np.sort(train), np.sort(val), np.sort(test)


def task_from_arrays(
    name: str,
    X: np.ndarray,
    y: np.ndarray,
    *,
    seed: int = 0,
    val: Split | None = None,
    test: Split | None = None,
    description: str = "",
) -> Task:
    """Check arrays and build a Task; a missing ``val``/``test`` split is carved out of ``(X, y)`` (stratified)."""
    X, y = np.asarray(X), np.asarray(y)
    given = _checked_splits(name, X, y, val, test)
    splits = _carve_splits(X, y, given, seed)
    _check_eval_splits(splits)
    return _to_task(name, description, X, splits, _n_classes(splits))


def _checked_splits(
    name: str, X: np.ndarray, y: np.ndarray, val: Split | None, test: Split | None
) -> dict[str, Split | None]:
    """Check every array (sizes, then each split's shapes, dtypes and values); the given splits as arrays."""
    pairs = {"X": X, "y": y} | {
        f"{k}_{s}": a for s, p in (("val", val), ("test", test)) if p for k, a in zip("Xy", p, strict=True)
    }
    check_array_sizes({k: (np.shape(a), np.asarray(a).dtype) for k, a in pairs.items()}, name)
    _check_split("", X, y)
    given = {"val": val, "test": test}
    for split, pair in given.items():
        if pair is not None:
            Xs, ys = np.asarray(pair[0]), np.asarray(pair[1])
            _check_split(f"_{split}", Xs, ys)
            if Xs.ndim != X.ndim:
                raise DataError(
                    f"X_{split} is {Xs.ndim}-D but X is {X.ndim}-D; every split must hold the same kind of input."
                )
            if Xs.shape[1:] != X.shape[1:]:
                raise DataError(
                    f"X_{split} has per-example shape {Xs.shape[1:]} but X has {X.shape[1:]}; every split "
                    f"needs the same sequence length (and features)."
                )
            given[split] = (Xs, ys)
    if np.unique(y).size < 2:
        raise DataError(
            f"y has a single class ({y[0] if len(y) else 'none'}); classification needs at least two."
        )
    return given


def _carve_splits(
    X: np.ndarray, y: np.ndarray, given: dict[str, Split | None], seed: int
) -> dict[str, Split]:
    """Train, val and test: each split not given is a seeded, stratified HOLDOUT share of ``(X, y)``."""
    n_val = 0 if given["val"] else round(HOLDOUT * len(y))
    n_test = 0 if given["test"] else round(HOLDOUT * len(y))
    if len(y) - n_val - n_test < MIN_TRAIN or (n_val and n_val < MIN_EVAL) or (n_test and n_test < MIN_EVAL):
        raise DataError(
            f"too few examples: {len(y)} in X/y leave fewer than {MIN_TRAIN} for training or {MIN_EVAL} for "
            f"validation/test; add examples."
        )
    tr, va, te = split_indices(y, seed, n_val, n_test)
    return {
        "train": (X[tr], y[tr]),
        "val": given["val"] or (X[va], y[va]),
        "test": given["test"] or (X[te], y[te]),
    }


def _check_eval_splits(splits: dict[str, Split]) -> None:
    """Validation and test need MIN_EVAL examples, and only labels that training has."""
    for split in ("val", "test"):
        ys = splits[split][1]
        if len(ys) < MIN_EVAL:
            raise DataError(
                f"too few examples: y_{split} has {len(ys)}, need at least {MIN_EVAL}; add examples."
            )
        unseen = sorted(set(np.unique(ys).tolist()) - set(np.unique(splits["train"][1]).tolist()))
        if unseen:
            raise DataError(
                f"y_{split} has label(s) {unseen[:5]} that never occur in training; every class needs training "
                f"examples (move some to X/y or drop those examples)."
            )


def _n_classes(splits: dict[str, Split]) -> int:
    """The classes (largest label + 1), refused when most of them never occur (MIN_CLASS_COVERAGE)."""
    n_classes = int(max(s[1].max() for s in splits.values())) + 1
    present = np.unique(np.concatenate([s[1] for s in splits.values()])).size
    if present < MIN_CLASS_COVERAGE * n_classes:
        raise DataError(
            f"y has {present} distinct labels but they run up to {n_classes - 1}, so {n_classes - present} of the "
            f"{n_classes} classes never occur; renumber them 0..{present - 1} with "
            f"`_, y = np.unique(y, return_inverse=True)` (one mapping for every split)."
        )
    return n_classes


def _to_task(name: str, description: str, X: np.ndarray, splits: dict[str, Split], n_classes: int) -> Task:
    """The splits as tensors (tokens as int64, features as float32) with their input spec."""
    if X.ndim == 2:
        vocab = int(max(s[0].max() for s in splits.values())) + 1
        spec = InputSpec(kind="tokens", seq_len=X.shape[1], n_classes=n_classes, vocab_size=vocab)
        to_x = torch.long
    else:
        spec = InputSpec(kind="features", seq_len=X.shape[1], n_classes=n_classes, n_features=X.shape[2])
        to_x = torch.float32

    def tensors(split: str) -> tuple[torch.Tensor, torch.Tensor]:
        Xs, ys = splits[split]
        return torch.as_tensor(np.ascontiguousarray(Xs)).to(to_x), torch.as_tensor(ys.astype(np.int64))

    return Task(
        name=name,
        spec=spec,
        description=description,
        train=tensors("train"),
        val=tensors("val"),
        test=tensors("test"),
    )
