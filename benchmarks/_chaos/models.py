"""A model builder for the scenarios that need a decided finalist grid whose answer is not its best layout.

Named by file path in a spec (``[model] build = ".../benchmarks/_chaos/models.py:ordered_by_heads"``), as a user's
builder would be. On a one-layer ladder of 1, 2 and 4 heads the layouts differ by a few microseconds and a few
accuracy points, so which is the fastest, and whether it is also the most accurate, turned on timing noise: a
study that should run its horizon check ran none in about a third of runs. Here both orders are fixed.
"""

from __future__ import annotations

import time

import torch
from torch import nn

import explorer

MS_PER_HEAD = 2.0  # an evaluation pass waits this long per head of its widest layer: latency rises with heads
WRONG_SHARE = 0.25  # the share of samples the one-head layout answers with class 0 when evaluated


class _Net(nn.Module):
    """Features [B, T, F] -> linear embedding + positions -> attention layers -> mean pool -> logits."""

    def __init__(self, layout, spec):
        super().__init__()
        self.embed = nn.Linear(spec.n_features, layout.d_model)
        self.pos = nn.Parameter(torch.randn(1, spec.seq_len, layout.d_model) * 0.02)
        self.layers = nn.ModuleList(
            explorer.MultiHeadAttention(
                layout.d_model, layout.heads[i], n_kv_heads=layout.kv_per_layer[i], head_dim=layout.d_k[i]
            )
            for i in range(layout.n_layers)
        )
        self.norm = nn.LayerNorm(layout.d_model)
        self.head = nn.Linear(layout.d_model, spec.n_classes)
        self.widest = max(layout.heads)

    def forward(self, x):
        h = self.embed(x) + self.pos
        for layer in self.layers:
            h = h + layer(h)[0]
        logits = self.head(self.norm(h).mean(1))
        if self.training:
            return logits
        time.sleep(MS_PER_HEAD * self.widest / 1000)
        if (
            self.widest == 1
        ):  # a quarter of its answers are class 0: clearly less accurate, well inside 50 points
            wrong = torch.arange(len(logits), device=logits.device) % round(1 / WRONG_SHARE) == 0
            forced = torch.full_like(logits, -1e4)
            forced[:, 0] = 1e4
            logits = torch.where(wrong[:, None], forced, logits)
        return logits


def ordered_by_heads(layout, spec):
    """explorer.MultiHeadAttention with the layout's heads, whose evaluation is slower the more heads its widest
    layer has (``MS_PER_HEAD`` a head) and, with one head, answers a quarter of its samples with class 0: the
    fastest layout is the one-head one and it is never the most accurate."""
    return _Net(layout, spec)
