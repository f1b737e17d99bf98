"""The text task: a byte corpus split by file with a seed, its hash, and bits per byte as the metric."""

from __future__ import annotations

import hashlib
import math

import pytest
import torch

from explorer.data import load_task
from explorer.data._text import SKIP_DIRS, build_corpus, corpus_files, load_text, windows
from explorer.errors import ConfigError, DataError
from explorer.layout import ModelConfig, TrainConfig
from explorer.measure import fit
from explorer.measure._train import evaluate_split
from explorer.measurements import quality_metric
from explorer.model import CausalLM


@pytest.fixture(autouse=True)
def _one_thread(one_thread):
    """Tiny models on a shared 2-core machine run fastest on one thread."""


@pytest.fixture
def source_tree(tmp_path):
    """40 small .py files with distinct contents, plus files that must be skipped."""
    root = tmp_path / "src"
    for i in range(40):
        folder = root / f"pkg{i % 4}"
        folder.mkdir(parents=True, exist_ok=True)
        (folder / f"mod{i:02d}.py").write_text(f"# module {i}\n" + f"def f{i}(x):\n    return x * {i}\n" * 30)
    for skipped in SKIP_DIRS:
        (root / skipped).mkdir(parents=True, exist_ok=True)
        (root / skipped / "skip_me.py").write_text("SKIPPED = True\n" * 100)
    (root / "notes.txt").write_text("not python\n")
    return root


def test_files_are_sorted_and_skip_installed_packages_and_tests(source_tree):
    files = corpus_files(source_tree)
    assert files == sorted(files) and len(files) == 40
    assert not any(set(f.split("/")[:-1]) & SKIP_DIRS for f in files) and all(
        f.endswith(".py") for f in files
    )
    with pytest.raises(DataError, match="not a folder"):
        corpus_files(source_tree / "missing")


def test_split_is_by_file_seeded_and_within_budget(source_tree):
    a = build_corpus(seed=0, max_bytes=30_000, root=source_tree)
    files = {name: set(f) for name, f in a.files.items()}
    assert not (files["train"] & files["val"]) and not (files["train"] & files["test"])
    assert not (files["val"] & files["test"])
    assert files["train"] and files["val"] and files["test"]
    # Each split's bytes are the files it lists, read in order (the last one possibly cut).
    for name, listed in a.files.items():
        full = b"".join((source_tree / f).read_bytes() for f in listed)
        assert full.startswith(a.splits[name])
        last = (source_tree / listed[-1]).read_bytes()
        assert len(full) - len(last) < len(a.splits[name])  # every listed file contributes
    assert [len(a.splits[s]) for s in ("val", "test")] == [3000, 3000] and len(a.splits["train"]) <= 24_000
    same = build_corpus(seed=0, max_bytes=30_000, root=source_tree)
    other = build_corpus(seed=1, max_bytes=30_000, root=source_tree)
    assert same == a and same.sha256 == a.sha256
    assert other.files != a.files and other.sha256 != a.sha256


def test_hash_is_sha256_of_the_named_splits(source_tree):
    c = build_corpus(seed=3, max_bytes=20_000, root=source_tree)
    h = hashlib.sha256()
    for name in ("train", "val", "test"):
        data = c.splits[name]
        h.update(name.encode() + len(data).to_bytes(8, "little") + data)
    assert c.sha256 == h.hexdigest()
    task = load_text(seed=3, context=32, max_bytes=20_000, root=str(source_tree))
    assert task.corpus_hash == c.sha256 and task.kind == "language_model"


def test_windows_predict_the_next_byte():
    x, y = windows(b"abcdefghij", 3)
    assert x.tolist() == [list(b"abc"), list(b"def"), list(b"ghi")]
    assert y.tolist() == [list(b"bcd"), list(b"efg"), list(b"hij")]


def test_standard_library_task_loads_offline_and_is_stable():
    task = load_task("text", context=64, max_bytes=20_000)
    again = load_task("text", context=64, max_bytes=20_000)
    assert task.corpus_hash == again.corpus_hash and len(task.corpus_hash) == 64
    assert task.spec.causal and task.spec.vocab_size == 256 and task.spec.seq_len == 64
    X, Y = task.train
    assert X.shape[1] == Y.shape[1] == 64 and X.dtype == torch.long and int(X.max()) < 256
    assert torch.equal(X[:, 1:], Y[:, :-1]) and torch.equal(Y[:-1, -1], X[1:, 0])


@pytest.mark.parametrize(
    ("options", "error", "message"),
    [
        ({"context": 1}, ConfigError, "context must be an integer 2..4096"),
        ({"context": "long"}, ConfigError, "context must be an integer"),
        ({"max_bytes": 100}, ConfigError, "max_bytes must be an integer 10000 or more"),
        ({"root": 3}, ConfigError, "root must be a folder path"),
        ({"root": "/nonexistent/folder"}, DataError, "not a folder"),
        ({"n_relations": 2}, ConfigError, "allowed: context, max_bytes, root"),
    ],
)
def test_bad_options_name_the_fix(options, error, message):
    with pytest.raises(error, match=message):
        load_task("text", **options)


def test_too_small_a_corpus_is_refused(tmp_path):
    (tmp_path / "a.py").write_text("x = 1\n")
    with pytest.raises(DataError, match="too little for the"):
        load_text(root=str(tmp_path), context=32, max_bytes=10_000)


def test_uniform_model_scores_exactly_eight_bits_per_byte():
    task = load_task("text", context=32, max_bytes=20_000)
    torch.manual_seed(0)
    model = CausalLM(ModelConfig(d_model=16, heads=(2,), kv_heads=(1,)), task.spec)
    with torch.no_grad():
        model.head.weight.zero_()
        model.head.bias.zero_()  # equal logits for every byte: the uniform guess
    score = evaluate_split(model, *task.val, torch.device("cpu"))
    # exactly 8 up to float32 rounding of log(256) in the log-softmax
    assert score.bits == pytest.approx(8.0, abs=1e-5) and score.loss == pytest.approx(math.log(256))
    assert score.targets == task.val[1].numel()


def test_fit_minimizes_bits_per_byte():
    task = load_task("text", context=32, max_bytes=20_000)
    cfg = ModelConfig.from_schedule(32, 1, "uniform:4", kv_heads="uniform:2")
    seen = []
    model, res = fit(
        cfg, task, TrainConfig(epochs=2, batch_size=16, lr=3e-3), torch.device("cpu"), on_epoch=seen.append
    )
    assert isinstance(model, CausalLM)
    assert res.task_kind == "language_model" and res.metric == quality_metric("language_model")
    assert res.metric.name == "val_bpb" and res.metric.direction == "minimize"
    assert res.quality == res.val_bpb == seen[-1].val_bpb < 8.0  # better than the uniform guess
    assert res.val_bpb == pytest.approx(res.val_loss / math.log(2)) and res.test_bpb is not None
    assert seen[-1].val_bpb < seen[0].val_bpb
    score = evaluate_split(model, *task.val, torch.device("cpu"))
    assert score.bits == pytest.approx(res.val_bpb) and score.accuracy == res.val_accuracy
    assert res.to_dict()["val_bpb"] == res.val_bpb
