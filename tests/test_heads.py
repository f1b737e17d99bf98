"""Head analysis: importance, masking, attention statistics, figures, stored weights, and one real trial end to end."""

from __future__ import annotations

import math
import os
import pickle
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import torch

from explorer.engine.config import InputSpec, ModelConfig, TrainConfig
from explorer.engine.model import build_model
from explorer.engine.tasks.base import Task
from explorer.engine.train import evaluate, fit
from explorer.errors import DataError
from explorer.insight import heads
from explorer.output import heads_plots
from explorer.output.export import trial_configs
from explorer.output.plots import save_png
from explorer.search.artifacts import ARTIFACT_DIR_ENV, ArtifactStore, artifact_root_for
from explorer.search.spec import load_spec
from explorer.search.study import prepare_study, run_study
from tests.fixtures import write_tiny_spec as write_spec

SPEC = InputSpec(kind="features", seq_len=6, n_classes=3, n_features=4)


def tiny_model(heads_: tuple[int, ...] = (4, 2), d_model: int = 16, impl: str = "fused", seed: int = 0):
    torch.manual_seed(seed)
    return build_model(ModelConfig(d_model=d_model, heads=heads_, attention=impl), SPEC).eval()


def data(n: int = 48, seed: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    return torch.randn(n, SPEC.seq_len, SPEC.n_features, generator=g), torch.randint(3, (n,), generator=g)


def structured_task(n: int = 300) -> Task:
    """Label = which of the first three features sums highest over the sequence: learnable in a few epochs."""
    g = torch.Generator().manual_seed(1)
    X = torch.randn(n, SPEC.seq_len, SPEC.n_features, generator=g)
    y = X[:, :, :3].sum(1).argmax(-1)
    cut = (n * 6 // 10, n * 8 // 10)
    return Task("structured", SPEC, (X[: cut[0]], y[: cut[0]]), (X[cut[0] : cut[1]], y[cut[0] : cut[1]]),
                (X[cut[1] :], y[cut[1] :]))  # fmt: skip


def kill_head(model, layer: int, head: int) -> None:
    """Zero the W_O columns that read ``head``: its output can no longer reach anything downstream."""
    attn = model.blocks[layer].attn
    with torch.no_grad():
        attn.proj.weight[:, head * attn.d_k : (head + 1) * attn.d_k] = 0.0


# --------------------------------------------------------------------------------------------- importance, masking


def test_importance_of_a_disabled_head_is_exactly_zero():
    model = tiny_model()
    kill_head(model, 0, 1)
    X, y = data()
    imp = heads.head_importance(model, X, y, "cpu", batch_size=16)
    assert [len(v) for v in imp] == [4, 2]
    assert imp[0][1] == 0.0
    assert all(imp[0][h] > 1e-4 for h in (0, 2, 3)) and all(imp[1] > 1e-4)
    for v in imp:  # L2-normalized per layer
        assert np.linalg.norm(v) == pytest.approx(1.0)
    assert model.blocks[0].attn.impl == "fused"  # the analysis restores the model's attention path


def test_importance_is_the_mean_absolute_per_example_gradient():
    model = tiny_model(seed=3)
    X, y = data(12)
    imp = heads.head_importance(model, X, y, "cpu", batch_size=5)
    total = [torch.zeros(h) for h in (4, 2)]
    for i in range(len(y)):  # the definition, one example at a time
        masks = [torch.ones(h, requires_grad=True) for h in (4, 2)]
        torch.nn.functional.cross_entropy(model(X[i : i + 1], head_masks=masks), y[i : i + 1]).backward()
        for t, m in zip(total, masks, strict=True):
            t += m.grad.abs()
    for got, want in zip(imp, total, strict=True):
        np.testing.assert_allclose(got, (want / want.norm()).numpy(), rtol=1e-4, atol=1e-6)


@pytest.mark.parametrize("impl", ["fused", "merged", "serial"])
def test_masking_a_head_is_removing_it(impl):
    masked, removed = tiny_model(impl=impl), tiny_model(impl=impl)
    kill_head(removed, 1, 0)
    X, _ = data()
    with torch.no_grad():
        a = masked(X, head_masks=[None, torch.tensor([0.0, 1.0])])
        b = removed(X)
        c = masked(X)
    torch.testing.assert_close(a, b, rtol=0, atol=1e-6)
    assert (a - c).abs().max() > 1e-4  # and the head did matter


pytestmark = pytest.mark.usefixtures("one_thread")


@pytest.fixture(scope="module")
def trained():
    task = structured_task()
    model, result = fit(ModelConfig(d_model=16, heads=(4, 2)), task, TrainConfig(epochs=10, lr=5e-3), "cpu")
    assert result.val_accuracy > 0.6  # learned something, so masking has something to lose
    X, y = task.val
    imp = heads.head_importance(model, X, y, "cpu")
    return model.eval(), X, y, imp


def test_masking_curves_and_heads_needed_agree(trained):
    model, X, y, imp = trained
    curve = heads.masking_curve(model, X, y, imp, "cpu")
    assert list(curve["n_masked"]) == list(range(7))
    assert curve["accuracy"].iloc[0] == pytest.approx(evaluate(model, X, y, "cpu"))
    assert curve["importance"].iloc[1:].is_monotonic_increasing  # least important first
    assert sorted(zip(curve["layer"].iloc[1:], curve["head"].iloc[1:], strict=True)) == [
        (0, 0), (0, 1), (0, 2), (0, 3), (1, 0), (1, 1)]  # fmt: skip

    layer_curves = heads.layer_masking_curves(model, X, y, imp, "cpu")
    tolerances = [-1.0, 0.0, 0.01, 0.05, 0.2, 1.0]
    needed = [
        heads.heads_needed(model, X, y, imp, "cpu", tolerance=t, curves=layer_curves) for t in tolerances
    ]
    assert needed[0] == [4, 2] and needed[-1] == [0, 0]  # nothing may go / anything may go
    for looser, stricter in zip(needed[1:], needed[:-1], strict=True):
        assert all(
            a <= b for a, b in zip(looser, stricter, strict=True)
        )  # more tolerance, fewer heads needed
    base = curve["accuracy"].iloc[0]
    for layer, (n_heads, need) in enumerate(zip((4, 2), needed[2], strict=True)):
        assert 0 <= need <= n_heads
        c = layer_curves[layer_curves["layer"] == layer].set_index("n_masked")["accuracy"]
        assert (c.loc[: n_heads - need] >= base - 0.01 - 1e-12).all()  # every step it may take stays within
        if need > 0:
            assert c.loc[n_heads - need + 1] < base - 0.01  # and the next one would not
    assert heads.heads_needed(model, X, y, imp, "cpu") == needed[2]  # computes the same curves itself


# --------------------------------------------------------------------------------------------- attention maps


def test_uniform_attention_has_entropy_log_t_and_identical_heads_are_maximally_similar():
    model = tiny_model(heads_=(4,), seed=5)
    attn, dk, C = model.blocks[0].attn, 4, 16  # head 3 gets head 2's queries and keys: the same maps
    with torch.no_grad():
        attn.qkv.weight[: 2 * C].normal_(0.0, 1.0)  # sharp queries and keys: far from uniform attention
        for part in (0, C):
            attn.qkv.weight[part : part + dk] = 0.0  # head 0: no queries or keys -> uniform attention
            attn.qkv.bias[part : part + dk] = 0.0
            attn.qkv.weight[part + 3 * dk : part + 4 * dk] = attn.qkv.weight[part + 2 * dk : part + 3 * dk]
            attn.qkv.bias[part + 3 * dk : part + 4 * dk] = attn.qkv.bias[part + 2 * dk : part + 3 * dk]
    X, _ = data()
    stats = heads.attention_stats(model, X, batch_size=20).set_index("head")
    assert stats.loc[0, "entropy"] == pytest.approx(math.log(SPEC.seq_len), abs=1e-6)  # float32 softmax
    assert (stats.loc[[1, 2, 3], "entropy"] < math.log(SPEC.seq_len) - 0.05).all()
    assert stats.loc[2, "most_similar"] == 3 and stats.loc[2, "similarity_max"] == pytest.approx(
        1.0, abs=1e-9
    )
    pairs = heads.attention_pairs(model, X)
    assert len(pairs) == 6 and pairs["similarity"].between(0, 1 + 1e-12).all()
    top = heads.redundant_pairs(pairs, threshold=0.999)
    assert (top.iloc[0]["head_a"], top.iloc[0]["head_b"]) == (2, 3)
    assert pairs["similarity"].idxmax() == pairs.index[(pairs["head_a"] == 2) & (pairs["head_b"] == 3)][0]


def test_unpatchify_inverts_the_digits_patches():
    from explorer.engine.tasks.digits import patchify

    img = np.arange(2 * 64, dtype=np.float32).reshape(2, 8, 8)
    for p in (1, 2, 4):
        np.testing.assert_array_equal(heads.unpatchify(patchify(img, p)), img)


def is_png(path: Path) -> bool:
    data_ = path.read_bytes()
    return data_[:8] == b"\x89PNG\r\n\x1a\n" and len(data_) > 2000


def test_figures_render(trained, tmp_path):
    model, X, y, imp = trained
    curve = heads.masking_curve(model, X, y, imp, "cpu")
    layer_curves = heads.layer_masking_curves(model, X, y, imp, "cpu")
    maps = [m.numpy() for m in model.attention_maps(X[:2])]
    images = np.random.default_rng(0).random((2, 8, 8))
    digit_maps = [np.full((2, 3, 16, 16), 1 / 16), np.full((2, 1, 16, 16), 1 / 16)]
    figures = {
        "importance": heads_plots.importance_figure(imp, [3, 2]),
        "masking": heads_plots.masking_figure(curve, layer_curves),
        "maps": heads_plots.attention_figure(maps),
        "digits": heads_plots.attention_figure(digit_maps, images, ["a", "b"]),
        "stats": heads_plots.attention_stats_figure(heads.attention_stats(model, X)),
    }
    for name, fig in figures.items():
        assert is_png(save_png(fig, tmp_path / f"{name}.png")), name


# --------------------------------------------------------------------------------------------- artifacts


class NotATensor:
    pass


def test_artifacts_round_trip_exactly_and_refuse_pickles(tmp_path):
    store = ArtifactStore(tmp_path / "a")
    model = tiny_model()
    path = store.save("s", 7, model)
    assert path == tmp_path / "a" / "s" / "trial-00007.pt" and store.has("s", 7) and not store.has("s", 8)
    state = store.load_state("s", 7)
    assert state.keys() == model.state_dict().keys()
    assert all(torch.equal(state[k], v) for k, v in model.state_dict().items())
    fresh = tiny_model(seed=9)
    fresh.load_state_dict(state)
    X, _ = data()
    with torch.no_grad():
        assert torch.equal(fresh(X), model(X))

    with open(store.path("s", 8), "wb") as f:
        pickle.dump({"w": NotATensor()}, f, protocol=2)  # unpickling this would build an arbitrary object
    with pytest.raises(DataError, match="not a plain tensor file"):
        store.load_state("s", 8)
    torch.save({"w": [1, 2]}, store.path("s", 9))  # loads under weights_only, but is no state_dict
    with pytest.raises(DataError, match="state_dict of tensors"):
        store.load_state("s", 9)
    with pytest.raises(DataError, match="no stored weights"):
        store.load_state("s", 10)


def test_artifact_size_limit_evicts_the_oldest_and_prune_keeps_the_chosen(tmp_path):
    model = tiny_model()
    size = ArtifactStore(tmp_path / "probe").save("s", 0, model).stat().st_size
    store = ArtifactStore(tmp_path / "a", max_bytes=int(2.5 * size))
    for n in range(3):
        p = store.save("s", n, model)
        os.utime(p, ns=(n * 10**9, n * 10**9))  # distinct ages whatever the clock's resolution
    store.save("s", 3, model)
    assert [store.has("s", n) for n in range(4)] == [False, False, True, True]
    assert store.total_bytes() <= store.max_bytes
    roomy = ArtifactStore(store.root)  # the default 200 MiB limit
    roomy.save("t", 0, model)
    assert roomy.prune("s", keep={3}) == [store.path("s", 2)]
    assert roomy.has("s", 3) and roomy.has("t", 0)


def test_artifact_root_for(monkeypatch, tmp_path):
    assert artifact_root_for(f"sqlite:///{tmp_path}/x/quick.db") == tmp_path / "x" / "quick.artifacts"
    assert artifact_root_for("sqlite:///studies/quick.db?timeout=30") == Path("studies/quick.artifacts")
    monkeypatch.delenv(ARTIFACT_DIR_ENV, raising=False)
    assert artifact_root_for("postgresql+psycopg://u:p@h/db") == Path("studies/artifacts")
    monkeypatch.setenv(ARTIFACT_DIR_ENV, str(tmp_path / "w"))
    assert artifact_root_for("postgresql+psycopg://u:p@h/db") == tmp_path / "w"


# --------------------------------------------------------------------------------------------- one trial, end to end


@pytest.fixture(scope="module")
def tiny_study(tmp_path_factory):
    """A real 2-trial study on digits; short heartbeats and no attention bench keep it to a few seconds."""
    tmp = tmp_path_factory.mktemp("heads-study")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("EXPLORER_HEARTBEAT_INTERVAL", "1")
        handle = prepare_study(
            load_spec(write_spec(tmp, n_trials=2, early=False)), f"sqlite:///{tmp}/tiny.db"
        )
        handle.study.set_user_attr(
            "bench", []
        )  # the objective skips the attention bench when one is recorded
        run_study(handle, device="cpu")
        yield handle


@pytest.mark.slow
def test_analyse_trial_retrains_exactly_stores_weights_and_writes_files(tiny_study, tmp_path):
    store = ArtifactStore(tmp_path / "weights")
    report = heads.analyse_trial(tiny_study, "knee", "cpu", tmp_path / "out", store=store)
    assert store.has("tiny", report.trial)  # no weights before: retrained, then kept
    cfg, _ = trial_configs(tiny_study, report.trial)
    assert report.heads == cfg.heads and len(report.heads_needed) == cfg.n_layers
    assert all(0 <= n <= h for n, h in zip(report.heads_needed, report.heads, strict=True))
    assert report.val_accuracy == pytest.approx(report.val_accuracy_stored, abs=1e-9)  # the retrain is exact
    assert len(report.table) == sum(report.heads)
    for key in ("importance", "masking", "attention_maps", "attention_stats"):
        assert is_png(report.files[key])
    assert "Second head-count recommendation" in report.files["markdown"].read_text()
    assert (tmp_path / "out" / "heads.csv").read_text().startswith("layer,head,importance")

    before = store.path("tiny", report.trial).stat().st_mtime_ns
    again = heads.analyse_trial(tiny_study, str(report.trial), "cpu", tmp_path / "out2", store=store)
    assert store.path("tiny", report.trial).stat().st_mtime_ns == before  # loaded, not retrained
    assert again.importance == report.importance


def test_specialization_from_hand_made_maps():
    # Two examples, T = 6; marker 0 then its target 1 position later, marker 1 then its target 2 positions back.
    X = np.array([[0, 5, 9, 7, 1, 8], [9, 0, 6, 1, 7, 7]])
    offsets = [1, -2]
    B, H, T = 2, 3, 6
    maps = np.full((B, H, T, T), 1.0 / T)
    for b in range(B):
        m0 = list(X[b]).index(0)
        m1 = list(X[b]).index(1)
        maps[b, 0, m0] = 0.0
        maps[b, 0, m0, m0 + 1] = 1.0  # head 0: marker 0 -> its target
        maps[b, 1, m1 - 2] = 0.0
        maps[b, 1, m1 - 2, m1] = 1.0  # head 1: relation 1's target -> its marker (the other direction)
    table = heads.specialization_from_maps([maps], X, offsets)
    att = table.set_index(["head", "relation"])["attention"]
    assert att[(0, 0)] == pytest.approx(1.0) and att[(1, 1)] == pytest.approx(1.0)
    assert att[(2, 0)] == pytest.approx(1 / T) and att[(2, 1)] == pytest.approx(1 / T)  # head 2: uniform
    summary = heads.specialized_heads(table)
    assert summary.to_dict(orient="records") == [
        {"layer": 0, "heads": 3, "specialized": 2, "relations_covered": 2, "k": 2, "relations": "0,1",
         "shared": 0, "detail": "1: 0; 2: 1"}
    ]  # fmt: skip
    assert heads.relations_followed(summary) == {0, 1}
    # A second layer where only relation 1 is followed adds no relation; the network-wide count stays 2.
    layer1 = table.assign(layer=1, attention=np.where(table["relation"] == 1, table["attention"], 0.0))
    both = heads.specialized_heads(pd.concat([table, layer1]))
    assert both["relations"].tolist() == ["0,1", "1"] and heads.relations_followed(both) == {0, 1}
    assert heads.describe_specialization(both) == (
        "layer 1: 2 of 3 heads follow a relation (head 1: relation 0, head 2: relation 1); "
        "layer 2: 1 of 3 heads follow a relation (head 2: relation 1); in all, heads follow 2 of the 2 relations"
    )
    # One head may follow several relations: the check does not assume "one head, one relation".
    shared = table.assign(attention=np.where(table["head"] == 2, 0.4, table["attention"]))
    one = heads.specialized_heads(shared)
    assert one[["specialized", "shared", "detail"]].to_dict(orient="records") == [
        {"specialized": 3, "shared": 1, "detail": "1: 0; 2: 1; 3: 0,1"}
    ]
    assert heads.describe_specialization(one).endswith("and 1 head follows more than one")
