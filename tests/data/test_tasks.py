"""Tests of the task package: digits, relations, user .npz files and the load_task dispatcher."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from sklearn.linear_model import LogisticRegression

from explorer.data import Task, load_task
from explorer.data._registry import TASKS
from explorer.data._relations_task import relation_rules
from explorer.errors import ConfigError, DataError


def relation_bits(X: np.ndarray, n_relations: int, vocab_size: int) -> np.ndarray:
    """Every relation's bit read off token sequences ``X [n, T]``, ``[n, n_relations]`` of 0/1: the reference
    decoder (the label is ``sum_r bits[:, r] << r``), which proves the label is a function of the input alone."""
    X = np.asarray(X)
    rows = np.arange(len(X))
    bits = np.zeros((len(X), n_relations), dtype=np.int64)
    for r, (offset, accept) in enumerate(relation_rules(n_relations, vocab_size)):
        marker = (X == r).argmax(axis=1)
        bits[:, r] = accept[X[rows, marker + offset]]
    return bits


def _all(task: Task) -> tuple[torch.Tensor, torch.Tensor]:
    return tuple(torch.cat([s[i] for s in (task.train, task.val, task.test)]) for i in (0, 1))


# ---------------------------------------------------------------- digits


@pytest.fixture(scope="module")
def digits() -> Task:
    return load_task("digits")


def test_digits_shapes_and_ranges(digits: Task) -> None:
    assert digits.sizes() == {"train": 1257, "val": 270, "test": 270}
    assert sum(digits.sizes().values()) == 1797
    X, y = _all(digits)
    assert X.shape == (1797, 16, 4) and X.dtype == torch.float32
    assert y.dtype == torch.int64 and set(y.tolist()) == set(range(10))
    assert X.min() == 0 and X.max() == 1
    assert digits.spec.kind == "features" and digits.spec.n_features == 4 and digits.spec.n_classes == 10
    for split in (digits.train, digits.val, digits.test):  # stratified: every class in every split
        assert len(torch.unique(split[1])) == 10


@pytest.mark.parametrize(("patch", "shape"), [(1, (64, 1)), (4, (4, 16))])
def test_digits_patch_sizes(patch: int, shape: tuple[int, int], digits: Task) -> None:
    task = load_task("digits", patch=patch)
    assert task.train[0].shape[1:] == shape
    # The same pixels, regrouped: the per-image pixel sum does not depend on the patch size.
    assert torch.allclose(task.train[0].sum((1, 2)), digits.train[0].sum((1, 2)))


def test_digits_patch_layout_is_row_major() -> None:
    from sklearn.datasets import load_digits

    from explorer.data._digits import patchify

    img = load_digits().images[:1] / 16.0
    patches = patchify(img, 2)
    assert np.allclose(patches[0, 1], img[0, 0:2, 2:4].reshape(-1))  # second patch: top row, next column
    assert np.allclose(patches[0, 4], img[0, 2:4, 0:2].reshape(-1))  # fifth patch: second row of patches


def test_digits_splits_disjoint_fixed_and_seeded(digits: Task) -> None:
    def rows(t: torch.Tensor) -> set[bytes]:
        return {r.numpy().tobytes() for r in t}

    tr, va, te = rows(digits.train[0]), rows(digits.val[0]), rows(digits.test[0])
    assert not (tr & va) and not (tr & te) and not (va & te)
    again = load_task("digits", seed=0)
    assert torch.equal(again.val[0], digits.val[0]) and torch.equal(again.test[1], digits.test[1])
    other = load_task("digits", seed=1)
    assert not torch.equal(other.val[0], digits.val[0])
    assert other.sizes() == digits.sizes()


@pytest.mark.parametrize("patch", [3, 8, 0, True])
def test_digits_bad_patch(patch: object) -> None:
    with pytest.raises(ConfigError, match="patch must be one of 1, 2, 4"):
        load_task("digits", patch=patch)


# ---------------------------------------------------------------- load_task


@pytest.mark.parametrize("name", TASKS)
def test_every_listed_task_name_reaches_its_own_loader(name: str) -> None:
    # the options are checked against the loader's own parameters before any data is read or generated
    with pytest.raises(ConfigError, match=rf"no_such_option for task '{name}'; allowed: \w"):
        load_task(name, no_such_option=1)


def test_load_task_errors() -> None:
    with pytest.raises(
        ConfigError, match="choose one of digits, mnist, relations, text, give a path ending in .npz, or name"
    ):
        load_task("imagenet")
    with pytest.raises(ConfigError, match="unknown option.*n_relation.*allowed: n_relations, seq_len"):
        load_task("relations", n_relation=3)
    with pytest.raises(ConfigError, match="allowed: patch"):
        load_task("digits", n_relations=3)
    with pytest.raises(ConfigError, match="non-negative integer"):
        load_task("digits", seed=-1)


# ---------------------------------------------------------------- relations


@pytest.mark.parametrize(("k", "seq_len"), [(1, 24), (2, 24), (4, 20), (8, 26)])
def test_relations_shapes_and_labels(k: int, seq_len: int) -> None:
    task = load_task("relations", n_relations=k, seq_len=seq_len, n_samples=2000, seed=3)
    assert task.spec.kind == "tokens" and task.spec.n_classes == 2**k and task.spec.seq_len == seq_len
    assert task.sizes() == {"train": 1400, "val": 300, "test": 300}
    X, y = _all(task)
    assert X.dtype == torch.int64 and X.shape == (2000, seq_len)
    assert 0 <= X.min() and X.max() < task.spec.vocab_size
    assert ((X < k).sum(1) == k).all()  # every marker exactly once
    # The label is a function of the input alone: decoding the relations off X gives it back.
    bits = relation_bits(X.numpy(), k, task.spec.vocab_size)
    assert np.array_equal((bits << np.arange(k)).sum(1), y.numpy())
    assert np.all(np.abs(bits.mean(0) - 0.5) < 0.05)  # every bit varies, about half the time
    if k <= 4:  # 256 classes from 2,000 examples are too few to judge balance by class
        counts = np.bincount(y.numpy(), minlength=2**k)
        assert counts.min() > 0.5 * counts.mean()  # balanced-ish


def test_relations_deterministic_per_seed() -> None:
    a = load_task("relations", n_samples=500, seed=0)
    b = load_task("relations", n_samples=500, seed=0)
    c = load_task("relations", n_samples=500, seed=1)
    assert torch.equal(a.train[0], b.train[0]) and torch.equal(a.test[1], b.test[1])
    assert not torch.equal(a.train[0], c.train[0])


def test_relations_not_solved_by_trivial_features() -> None:
    """Bag-of-tokens counts and a per-position one-hot give a linear model little; the task allows 100%."""
    k = 2
    task = load_task("relations", n_relations=k, n_samples=3000, seed=0)
    (Xtr, ytr), (Xte, yte) = task.train, task.test
    V = task.spec.vocab_size

    def bag(X: torch.Tensor) -> np.ndarray:
        return np.stack([np.bincount(row, minlength=V) for row in X.numpy()])

    def onehot(X: torch.Tensor) -> np.ndarray:
        return np.eye(V)[X.numpy()].reshape(len(X), -1)

    for feats in (bag, onehot):
        clf = LogisticRegression(max_iter=300).fit(feats(Xtr), ytr.numpy())
        acc = clf.score(feats(Xte), yte.numpy())
        assert acc < 0.45, f"{feats.__name__} reaches {acc:.2f} (chance 0.25, the task allows 1.0)"
    # Per bit as well: no relation's bit is readable off the bag of tokens.
    bits_tr = relation_bits(Xtr.numpy(), k, V)
    bits_te = relation_bits(Xte.numpy(), k, V)
    for r in range(k):
        acc = LogisticRegression(max_iter=300).fit(bag(Xtr), bits_tr[:, r]).score(bag(Xte), bits_te[:, r])
        assert acc < 0.7, f"bit {r} is {acc:.2f} predictable from the bag of tokens"


@pytest.mark.parametrize(
    ("options", "match"),
    [
        ({"n_relations": 0}, "n_relations must be an integer 1..8"),
        ({"n_relations": 9}, "n_relations must be an integer 1..8"),
        ({"n_relations": 8, "seq_len": 24}, "seq_len must be an integer 26 or more"),
        ({"vocab_size": 5, "n_relations": 2}, "vocab_size must be an integer 6 or more"),
        ({"n_samples": 10}, "n_samples must be an integer 40 or more"),
        ({"seq_len": 2.5}, "seq_len must be an integer"),
    ],
)
def test_relations_bad_options(options: dict, match: str) -> None:
    with pytest.raises(ConfigError, match=match):
        load_task("relations", **options)


# ---------------------------------------------------------------- npz


def _tokens(n: int = 60, seq: int = 5, classes: int = 3, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    return rng.integers(0, 7, size=(n, seq)), np.arange(n) % classes


def test_npz_round_trip_tokens(tmp_path) -> None:
    X, y = _tokens(100)
    path = tmp_path / "mine.npz"
    np.savez(path, X=X, y=y)
    task = load_task(str(path), seed=0)
    assert task.name == "mine" and task.spec.kind == "tokens"
    assert task.spec.vocab_size == X.max() + 1 and task.spec.n_classes == 3 and task.spec.seq_len == 5
    assert task.sizes() == {"train": 70, "val": 15, "test": 15}
    Xa, ya = _all(task)
    assert sorted(map(tuple, Xa.tolist())) == sorted(map(tuple, X.tolist()))
    assert sorted(ya.tolist()) == sorted(y.tolist())
    assert torch.equal(load_task(path, seed=0).val[0], task.val[0])
    assert not torch.equal(load_task(path, seed=1).val[0], task.val[0])


def test_npz_round_trip_features_with_given_splits(tmp_path) -> None:
    rng = np.random.default_rng(0)
    X = rng.normal(size=(40, 6, 3)).astype(np.float32)
    y = np.arange(40) % 2
    Xv, yv = X[:5] + 1, y[:5]
    Xt, yt = X[:7] - 1, np.array([0, 1, 1, 0, 1, 0, 3])
    path = tmp_path / "feats.npz"
    np.savez(path, X=X, y=np.where(np.arange(40) == 39, 3, y), X_val=Xv, y_val=yv, X_test=Xt, y_test=yt)
    task = load_task(path)
    assert task.spec.kind == "features" and task.spec.n_features == 3 and task.spec.n_classes == 4
    assert task.sizes() == {"train": 40, "val": 5, "test": 7}
    assert torch.allclose(task.val[0], torch.from_numpy(Xv)) and task.train[0].dtype == torch.float32


def _save(tmp_path, **arrays) -> str:
    path = tmp_path / "bad.npz"
    np.savez(path, **arrays)
    return str(path)


X0, Y0 = _tokens()
NPZ_ERRORS = [
    ({"X": X0}, "no array 'y'"),
    ({"y": Y0}, "no array 'X'"),
    ({"X": X0, "y": Y0, "weights": Y0}, r"unknown array\(s\) \['weights'\]"),
    ({"X": X0.astype(np.float32), "y": Y0}, "tokens must be integers"),
    ({"X": X0, "y": Y0.astype(np.float64)}, "labels must be integers"),
    ({"X": X0[:, :, None, None], "y": Y0}, "4-D arrays are images; cut them into patches"),
    ({"X": X0[:, :, None, None, None], "y": Y0}, "must be integer tokens"),
    ({"X": X0, "y": Y0[:, None]}, "must be 1-D labels"),
    ({"X": X0, "y": Y0[:-1]}, "60 examples but y has 59 labels"),
    ({"X": np.where(X0[..., None] == 1, np.nan, 1.0), "y": Y0}, "NaN or inf"),
    ({"X": np.full((60, 5, 2), np.inf), "y": Y0}, "NaN or inf"),
    ({"X": X0, "y": Y0 - 1}, "negative labels"),
    ({"X": X0 - 3, "y": Y0}, "negative token ids"),
    ({"X": X0, "y": Y0 * 0}, "single class"),
    ({"X": X0[:8], "y": Y0[:8]}, "too few examples"),
    ({"X": X0, "y": Y0, "X_val": X0[:4, :3], "y_val": Y0[:4]}, "same sequence length"),
    ({"X": X0, "y": Y0, "X_val": X0[:4, :, None] * 1.0, "y_val": Y0[:4]}, "same kind of input"),
    (
        {"X": X0, "y": Y0, "X_test": X0[:4], "y_test": np.array([0, 1, 2, 5])},
        r"label\(s\) \[5\] that never occur",
    ),
    ({"X": X0, "y": Y0, "X_val": X0[:4]}, "'X_val' but not 'y_val'"),
    ({"X": X0, "y": Y0, "X_val": X0[:1], "y_val": Y0[:1]}, "y_val has 1"),
    ({"X": X0, "y": np.r_[Y0[:-1], 9]}, "class 9 has 1 example"),
    # Sizes follow from values: these asked for a 140 TB classifier / embedding (a traceback) or trained a
    # 5001-way classifier for three classes.
    ({"X": X0, "y": np.r_[Y0[:-1], 2**40]}, "label 1099511627776, but labels must be below 65,536"),
    (
        {"X": np.where(X0 == 1, 2**40, X0), "y": Y0},
        "token id 1099511627776, but token ids must be below 1,048,576",
    ),
    (
        {"X": X0, "y": Y0, "X_val": X0[:4], "y_val": np.array([0, 1, 2, 2**40])},
        "y_val has label 1099511627776",
    ),
    ({"X": X0, "y": np.array([0, 1, 5000])[Y0]}, r"3 distinct labels but they run up to 5000.*np.unique\(y"),
]


@pytest.mark.parametrize(("arrays", "match"), NPZ_ERRORS, ids=[m for _, m in NPZ_ERRORS])
def test_npz_errors(tmp_path, arrays: dict, match: str) -> None:
    path = _save(tmp_path, **arrays)
    with pytest.raises(DataError, match=match) as info:
        load_task(path)
    assert "\n" not in str(info.value)


def test_npz_refuses_pickled_objects(tmp_path) -> None:
    path = tmp_path / "evil.npz"
    X = np.empty((60, 5), dtype=object)
    X[:] = 1
    np.savez(path, X=X, y=Y0)  # numpy pickles object arrays on save
    with pytest.raises(DataError, match="holds Python objects .* refused"):
        load_task(path)


def test_npz_file_problems(tmp_path) -> None:
    with pytest.raises(DataError, match="no such file"):
        load_task(tmp_path / "missing.npz")
    text = tmp_path / "text.npz"
    text.write_text("not numpy")
    with pytest.raises(DataError, match="not an .npz archive"):
        load_task(text)
    npy = tmp_path / "single.npz"
    with open(npy, "wb") as f:
        np.save(f, X0)
    with pytest.raises(DataError, match="not an .npz archive"):
        load_task(npy)
    with pytest.raises(ConfigError, match="allowed: patch, layout"):
        load_task(_save(tmp_path, X=X0, y=Y0), n_relations=2)
    with pytest.raises(DataError, match="with a patch option it must be images"):
        load_task(_save(tmp_path, X=X0, y=Y0), patch=2)
