"""A small Vision Transformer, written the way you would write your own, for explorer's ``[model] build``.

explorer calls ``build(layout, spec)`` once per model it trains or times: ``layout`` is the head layout it wants
measured (``d_model``, ``heads`` and ``d_k`` per layer, ``kv_per_layer``, ``mlp_ratio``, ``dropout``), ``spec``
what the task feeds the model (here image patches: ``[B, T, F]`` with ``T = spec.seq_len`` patches of
``F = spec.n_features`` pixels). The model's attention is ``explorer.MultiHeadAttention``, so explorer can see
that every layer has the heads it asked for (``torch.nn.MultiheadAttention`` works as well).

Unlike explorer's own encoder this one has a class token and a linear patch embedding (a stride-P convolution
on the image, written as the matmul it is on flattened patches).
"""

from __future__ import annotations

import torch
from torch import nn

import explorer


class Block(nn.Module):
    """Pre-norm Transformer block: attention, then an MLP, each with a residual connection."""

    def __init__(self, dim: int, heads: int, kv_heads: int, head_dim: int, mlp_ratio: float, dropout: float):
        super().__init__()
        self.norm1 = nn.LayerNorm(dim)
        self.attn = explorer.MultiHeadAttention(
            dim, heads, n_kv_heads=kv_heads, head_dim=head_dim, dropout=dropout
        )
        self.norm2 = nn.LayerNorm(dim)
        hidden = int(dim * mlp_ratio)
        self.mlp = nn.Sequential(
            nn.Linear(dim, hidden), nn.GELU(), nn.Linear(hidden, dim), nn.Dropout(dropout)
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x + self.attn(self.norm1(x))[0]  # the module returns (output, attention weights or None)
        return x + self.mlp(self.norm2(x))


class ViT(nn.Module):
    """Patches -> linear embedding + class token + learned positions -> blocks -> class token -> logits."""

    def __init__(self, layout: explorer.ModelConfig, spec: explorer.InputSpec):
        super().__init__()
        dim = layout.d_model
        self.patch_embed = nn.Linear(spec.n_features, dim)
        self.cls_token = nn.Parameter(torch.zeros(1, 1, dim))
        self.pos_embed = nn.Parameter(torch.randn(1, spec.seq_len + 1, dim) * 0.02)
        self.blocks = nn.ModuleList(
            Block(dim, h, kv, dk, layout.mlp_ratio, layout.dropout)
            for h, kv, dk in zip(layout.heads, layout.kv_per_layer, layout.d_k, strict=True)
        )
        self.norm = nn.LayerNorm(dim)
        self.head = nn.Linear(dim, spec.n_classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        B = x.shape[0]
        x = self.patch_embed(x)  # [B, T, dim]
        x = torch.cat([self.cls_token.expand(B, -1, -1), x], dim=1) + self.pos_embed  # [B, T + 1, dim]
        for block in self.blocks:
            x = block(x)
        return self.head(self.norm(x[:, 0]))  # [B, n_classes]


def build(layout: explorer.ModelConfig, spec: explorer.InputSpec) -> nn.Module:
    return ViT(layout, spec)
