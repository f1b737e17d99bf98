"""Small models and data shared by the head-analysis tests (the probes of explorer.measure, the analysis, the output)."""

from __future__ import annotations

import torch

from explorer.data import Task
from explorer.layout import InputSpec, ModelConfig
from explorer.model import build_model

__all__ = ["SPEC", "data", "kill_head", "structured_task", "tiny_model"]

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
    return Task(
        "structured",
        SPEC,
        (X[: cut[0]], y[: cut[0]]),
        (X[cut[0] : cut[1]], y[cut[0] : cut[1]]),
        (X[cut[1] :], y[cut[1] :]),
    )


def kill_head(model, layer: int, head: int) -> None:
    """Zero the W_O columns that read ``head``: its output can no longer reach anything downstream."""
    attn = model.blocks[layer].attn
    with torch.no_grad():
        attn.proj.weight[:, head * attn.d_k : (head + 1) * attn.d_k] = 0.0
