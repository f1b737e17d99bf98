"""Multi-head self-attention: one module, one set of weights, three implementations.

* ``fused``: ``F.scaled_dot_product_attention`` over all heads at once (the default; PyTorch picks a
  flash/memory-efficient/math kernel for the device);
* ``merged``: the seed's "compute all heads at once" written out: one Q/K/V projection of width d_model,
  reshape to ``[B, H, T, d_k]``, one batched matmul for the scores of every head, one for the values;
* ``serial``: the seed's baseline, a Python loop over heads, each with its own slice of the projections.

All three read the same parameters (``qkv`` packs W_Q, W_K, W_V row-wise exactly like
``torch.nn.MultiheadAttention.in_proj_weight``), so they are interchangeable on a trained model and the tests
can check that they agree. Which one runs is decided in :meth:`MultiHeadAttention._impl_for`, and only there.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn

from explorer.engine.config import ATTENTION_IMPLS
from explorer.errors import ConfigError

__all__ = ["MultiHeadAttention", "attention_flops", "set_attention_impl"]


class MultiHeadAttention(nn.Module):
    """Multi-head self-attention over ``[B, T, d_model]``.

    Args:
        d_model: input and output width; must be divisible by ``n_heads``.
        n_heads: number of heads; each has ``d_k = d_model // n_heads``.
        impl: ``"fused"``, ``"merged"`` or ``"serial"`` (see the module docstring).
        bias: whether the projections have biases.
        dropout: dropout on the attention probabilities while training.
    """

    def __init__(
        self, d_model: int, n_heads: int, *, impl: str = "fused", bias: bool = True, dropout: float = 0.0
    ):
        super().__init__()
        if n_heads < 1 or d_model % n_heads:
            raise ConfigError(
                f"d_model={d_model} is not divisible by n_heads={n_heads}; d_k must be an integer."
            )
        if impl not in ATTENTION_IMPLS:
            raise ConfigError(f"attention impl must be one of {', '.join(ATTENTION_IMPLS)}, got {impl!r}.")
        self.d_model, self.n_heads, self.d_k = d_model, n_heads, d_model // n_heads
        self.impl = impl
        self.dropout = dropout
        self.qkv = nn.Linear(d_model, 3 * d_model, bias=bias)  # rows: [W_Q; W_K; W_V]
        self.proj = nn.Linear(d_model, d_model, bias=bias)  # W_O

    def _impl_for(self, need_weights: bool) -> str:
        # The fused kernel never materializes the attention matrix, so asking for it selects the merged path.
        return "merged" if need_weights and self.impl == "fused" else self.impl

    def forward(
        self, x: torch.Tensor, head_mask: torch.Tensor | None = None, need_weights: bool = False
    ) -> tuple[torch.Tensor, torch.Tensor | None]:
        """Attend over ``x``.

        Args:
            x: ``[B, T, d_model]``.
            head_mask: optional ``[n_heads]`` multiplier on each head's output (0 removes a head; its gradient
                is the head-importance signal of Michel et al., 2019).
            need_weights: also return the attention probabilities ``[B, n_heads, T, T]``.

        Returns:
            ``(y, weights)``: ``y`` is ``[B, T, d_model]``; ``weights`` is None unless asked for.
        """
        impl = self._impl_for(need_weights)
        if impl == "serial":
            y, weights = self._serial(x, head_mask, need_weights)
        else:
            y, weights = self._batched(x, head_mask, fused=impl == "fused")
        return self.proj(y), weights

    def _batched(
        self, x: torch.Tensor, head_mask: torch.Tensor | None, fused: bool
    ) -> tuple[torch.Tensor, torch.Tensor | None]:
        B, T, C = x.shape
        H, dk = self.n_heads, self.d_k
        qkv = self.qkv(x).reshape(B, T, 3, H, dk)  # [B, T, 3, H, dk]
        q, k, v = qkv.permute(2, 0, 3, 1, 4).unbind(0)  # each [B, H, T, dk]
        p = self.dropout if self.training else 0.0
        weights = None
        if fused:
            y = F.scaled_dot_product_attention(q, k, v, dropout_p=p)  # [B, H, T, dk]
        else:
            weights = torch.softmax((q @ k.transpose(-2, -1)) / math.sqrt(dk), dim=-1)  # [B, H, T, T]
            y = F.dropout(weights, p) @ v  # [B, H, T, dk]
        if head_mask is not None:
            y = y * head_mask.view(1, H, 1, 1)
        # [B, H, T, dk] -> [B, T, H, dk] is not contiguous, so reshape (not view) copies before merging heads.
        return y.transpose(1, 2).reshape(B, T, C), weights

    def _serial(
        self, x: torch.Tensor, head_mask: torch.Tensor | None, need_weights: bool
    ) -> tuple[torch.Tensor, torch.Tensor | None]:
        C, dk = self.d_model, self.d_k
        w, b = self.qkv.weight, self.qkv.bias
        p = self.dropout if self.training else 0.0
        outs, maps = [], []
        for h in range(self.n_heads):
            rows = [slice(part * C + h * dk, part * C + (h + 1) * dk) for part in range(3)]
            q, k, v = (F.linear(x, w[r], None if b is None else b[r]) for r in rows)  # each [B, T, dk]
            att = torch.softmax((q @ k.transpose(-2, -1)) / math.sqrt(dk), dim=-1)  # [B, T, T]
            y = F.dropout(att, p) @ v  # [B, T, dk]
            outs.append(y if head_mask is None else y * head_mask[h])
            if need_weights:
                maps.append(att)
        weights = torch.stack(maps, dim=1) if need_weights else None  # [B, H, T, T]
        return torch.cat(outs, dim=-1), weights  # [B, T, C]


def set_attention_impl(module: nn.Module, impl: str) -> nn.Module:
    """Switch every :class:`MultiHeadAttention` inside ``module`` to ``impl`` (weights are unchanged)."""
    if impl not in ATTENTION_IMPLS:
        raise ConfigError(f"attention impl must be one of {', '.join(ATTENTION_IMPLS)}, got {impl!r}.")
    for m in module.modules():
        if isinstance(m, MultiHeadAttention):
            m.impl = impl
    return module


def attention_flops(batch: int, seq_len: int, d_model: int) -> int:
    """Multiply-adds x2 of one self-attention forward: Q/K/V and output projections plus QK^T and AV.

    The head count does not change the FLOPs (it only splits the same work into smaller matmuls), which is
    exactly why the seed's speed differences are about how the work is scheduled, not how much there is.
    """
    projections = 2 * batch * seq_len * d_model * 4 * d_model
    scores_and_values = 2 * 2 * batch * seq_len * seq_len * d_model
    return projections + scores_and_values
