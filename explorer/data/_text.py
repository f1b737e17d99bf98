"""``text``: byte-level language modelling on the Python standard library's own source. No download.

Real text that every machine running explorer already has: the ``*.py`` files of the standard library
(``sysconfig.get_paths()["stdlib"]``; code, comments and docstrings), or of any folder given as ``root``.
Installed packages (``site-packages``, ``dist-packages``) are left out so the corpus does not depend on what
else is installed, and so are the test suites (``test``, ``tests``, ``idle_test``: thousands of files with
deliberately odd content).

Split by file, fixed and seeded: the sorted file list is shuffled with ``seed`` and read in that order into
validation (10% of ``max_bytes``), then test (10%), then training (the rest); the file that fills a split is
cut there and its remainder dropped, so no file contributes to two splits (nearby lines of one file would
otherwise leak between them). Each split is cut into consecutive windows of ``context`` bytes; at every
position the model predicts the byte that follows, so every byte of a split but the first is a target once.

The vocabulary is the 256 byte values and the metric is bits per byte (mean cross-entropy / ln 2; a uniform
guess scores exactly 8). ``Task.corpus_hash`` is the sha256 of the bytes used (each split named and
length-prefixed), so two results are comparable only when their hashes match: the standard library differs
between Python versions.
"""

from __future__ import annotations

import hashlib
import os
import platform
import sysconfig
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

from explorer.data._base import Task, check_int
from explorer.errors import ConfigError, DataError
from explorer.layout import InputSpec
from explorer.limits import check_memory

SKIP_DIRS = frozenset({"site-packages", "dist-packages", "__pycache__", "test", "tests", "idle_test"})
SPLIT_FRACTIONS = {"val": 0.1, "test": 0.1}  # of max_bytes; training gets the rest
VOCAB = 256  # byte values
MIN_CONTEXT, MAX_CONTEXT = 2, 4096
_MIN_WINDOWS = 4  # each split must give at least this many windows


@dataclass(frozen=True)
class Corpus:
    """The bytes of each split and the files they came from (relative to ``root``, in reading order)."""

    root: str
    splits: dict[str, bytes]  # "train" | "val" | "test" -> bytes
    files: dict[str, tuple[str, ...]]  # the same keys -> files read into that split
    sha256: str  # of the bytes used: each split's name, length and bytes, in the order train, val, test


def corpus_files(root: str | Path) -> list[str]:
    """The ``*.py`` files under ``root`` as sorted POSIX paths relative to it, outside :data:`SKIP_DIRS`."""
    base = Path(root)
    if not base.is_dir():
        raise DataError(
            f"text corpus root {base} is not a folder; give a folder of .py files (or leave it out)."
        )
    found = []
    for folder, dirs, names in os.walk(base):
        dirs[:] = [d for d in dirs if d not in SKIP_DIRS]  # pruned, so site-packages is never walked
        rel = Path(folder).relative_to(base)
        found += [(rel / n).as_posix() for n in names if n.endswith(".py")]
    return sorted(found)


def build_corpus(*, seed: int = 0, max_bytes: int = 600_000, root: str | Path | None = None) -> Corpus:
    """Read files in a seeded order into validation, test and training byte budgets (module docstring)."""
    base = Path(root) if root is not None else Path(sysconfig.get_paths()["stdlib"])
    files = corpus_files(base)
    order = np.random.default_rng(seed).permutation(len(files))
    budgets = {name: round(frac * max_bytes) for name, frac in SPLIT_FRACTIONS.items()}
    budgets["train"] = max_bytes - sum(budgets.values())
    parts: dict[str, list[bytes]] = {name: [] for name in budgets}
    used: dict[str, list[str]] = {name: [] for name in budgets}
    names = list(budgets)  # val, test, train: filled in this order
    current, room = 0, budgets[names[0]]
    for i in order:
        if current == len(names):
            break
        path = base / files[i]
        if not path.is_file():  # a pipe or device named .py would block or never end
            continue
        with path.open("rb") as f:
            take = f.read(room)  # no more than the split still needs: a huge file is not read whole
        if not take:
            continue
        parts[names[current]].append(take)
        used[names[current]].append(files[i])
        room -= len(take)
        if room == 0:
            current += 1
            room = budgets[names[current]] if current < len(names) else 0
    splits = {name: b"".join(parts[name]) for name in ("train", "val", "test")}
    digest = hashlib.sha256()
    for name, data in splits.items():
        digest.update(name.encode() + len(data).to_bytes(8, "little") + data)
    return Corpus(
        root=str(base),
        splits=splits,
        files={name: tuple(used[name]) for name in ("train", "val", "test")},
        sha256=digest.hexdigest(),
    )


def windows(data: bytes, context: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Consecutive windows of a byte stream: ``x`` ``[n, context]`` and ``y``, the byte after each one."""
    b = np.frombuffer(data, dtype=np.uint8)
    n = (len(b) - 1) // context
    x = b[: n * context].reshape(n, context)  # [n, T]
    y = b[1 : n * context + 1].reshape(n, context)  # [n, T]: the byte after each position
    return torch.from_numpy(x.astype(np.int64)), torch.from_numpy(y.astype(np.int64))


def load_text(
    *, seed: int = 0, context: int = 128, max_bytes: int = 600_000, root: str | None = None
) -> Task:
    """The text task: ``max_bytes`` bytes of Python source split by file, in windows of ``context`` bytes.

    Args:
        seed: fixes which files go to which split (and the cut of the last file of each).
        context: bytes the model reads (its positions); each window predicts ``context`` next bytes.
        max_bytes: bytes read in all (10% validation, 10% test, the rest training).
        root: a folder of ``.py`` files to read instead of the standard library.
    """
    context = check_int("text", "context", context, MIN_CONTEXT, MAX_CONTEXT)
    smallest = _MIN_WINDOWS * (context + 1)
    floor = max(10_000, int(smallest / min(SPLIT_FRACTIONS.values())) + 1)
    max_bytes = check_int("text", "max_bytes", max_bytes, floor)
    # the bytes, then int64 windows of inputs and targets (8 bytes each, twice) and their splits
    check_memory(20 * max_bytes, f"the text task's max_bytes of {max_bytes:,}", "lower max_bytes")
    if root is not None and not isinstance(root, str):
        raise ConfigError(f"text option root must be a folder path, got {root!r}.")
    corpus = build_corpus(seed=seed, max_bytes=max_bytes, root=root)
    for name, data in corpus.splits.items():
        if len(data) < smallest:
            raise DataError(
                f"the text corpus under {corpus.root} holds too little for the {name} split "
                f"({len(data)} bytes, need {smallest} for {_MIN_WINDOWS} windows of context {context}); "
                f"lower context or max_bytes, or give a root with more .py files."
            )
    train, val, test = (windows(corpus.splits[name], context) for name in ("train", "val", "test"))
    spec = InputSpec(
        kind="tokens", seq_len=context, n_classes=VOCAB, vocab_size=VOCAB, task_kind="language_model"
    )
    source = "Python standard library" if root is None else f"{root}"
    n_files = sum(len(f) for f in corpus.files.values())
    description = (
        f"text: bytes of {n_files} .py files of the {source} (Python {platform.python_version()}), "
        f"{len(corpus.splits['train'])}/{len(corpus.splits['val'])}/{len(corpus.splits['test'])} bytes "
        f"train/val/test split by file, context {context}, sha256 {corpus.sha256[:12]}"
    )
    return Task("text", spec, train, val, test, description, corpus_hash=corpus.sha256)
