"""Multi-head self-attention: one module, one set of weights, three implementations.

* ``fused``: ``F.scaled_dot_product_attention`` over all heads at once (the default; PyTorch picks a
  flash/memory-efficient/math kernel for the device), with its grouped-query support (``enable_gqa``) when
  there are fewer key/value heads than query heads;
* ``merged``: the tutorial's "compute all heads at once" written out: one Q/K/V projection, reshape to
  ``[B, H, T, d_k]``, one batched matmul for the scores of every head, one for the values; grouped query heads
  are a view ``[B, H_kv, G, T, d_k]`` against their shared key/value head, so nothing is copied;
* ``serial``: the tutorial's baseline, a Python loop over heads, each with its own slice of the projections.

Key/value heads: ``n_kv_heads`` (dividing ``n_heads``) key and value heads are shared by groups of
``G = n_heads / n_kv_heads`` consecutive query heads (query head ``h`` reads key/value head ``h // G``, as
``repeat_interleave`` and SDPA's ``enable_gqa`` do). ``n_kv_heads = n_heads`` is ordinary multi-head
attention, 1 is multi-query attention. Head width: ``head_dim`` (default ``d_model / n_heads``).

All three read the same parameters: ``qkv`` packs W_Q (``n_heads x d_k`` rows), W_K and W_V
(``n_kv_heads x d_k`` rows each) row-wise, which for the default shape is exactly
``torch.nn.MultiheadAttention.in_proj_weight``, so trained weights load unchanged and the tests can check that
the paths agree. Which one runs is decided in :meth:`MultiHeadAttention._impl_for`, and only there.

Causal attention (a language model) masks the future; a :class:`KVCache` keeps the keys and values of earlier
positions so that decoding one new token attends over the cache instead of recomputing it.

Probes reach the heads of any model built from this module, explorer's or a user's, through two attributes
(:mod:`explorer.measure._probe` sets them and puts them back): ``probe_mask``, a ``[n_heads]`` multiplier used
when ``forward`` is given no ``head_mask``, and ``probe_maps``, a list that every forward appends its
attention probabilities to while it is set. Both are None otherwise, and the computation is the usual one.
"""

from __future__ import annotations

import math
from typing import TypeVar

import torch
import torch.nn.functional as F
from torch import nn

from explorer.errors import ConfigError
from explorer.layout import ATTENTION_IMPLS

# scaled_dot_product_attention takes enable_gqa from torch 2.5; before that, key/value heads are repeated.
_SDPA_GQA = tuple(int(part) for part in torch.__version__.split(".")[:2]) >= (2, 5)

_M = TypeVar("_M", bound=nn.Module)


def causal_mask(T: int, S: int, device: torch.device | None = None) -> torch.Tensor:
    """``[T, S]`` bool, True where query ``i`` may see key ``j``.

    The ``T`` queries are the last ``T`` of ``S`` positions (a cache of ``S - T`` before them), so query ``i``
    sees keys ``0 .. S - T + i``.
    """
    return torch.ones(T, S, dtype=torch.bool, device=device).tril(diagonal=S - T)


class KVCache:
    """Keys and values of the positions decoded so far, preallocated per layer to ``max_len`` positions.

    ``length`` is how many positions are filled. A forward pass writes its new positions into every layer
    through :meth:`layer` and the model then calls :meth:`advance` once; setting ``length`` back (e.g. to time
    one step against a fixed context again and again) simply overwrites what follows.

    Args:
        shapes: per layer ``(n_kv_heads, d_k)``.
        batch_size, max_len: sequences and positions the cache holds.
        device, dtype: where and how the buffers are stored.
    """

    def __init__(
        self,
        shapes: list[tuple[int, int]],
        batch_size: int,
        max_len: int,
        device: torch.device | None = None,
        dtype: torch.dtype = torch.float32,
    ):
        if batch_size < 1 or max_len < 1:
            raise ConfigError(
                f"a kv cache needs batch_size >= 1 and max_len >= 1, got {batch_size}, {max_len}."
            )
        self.max_len, self.length = max_len, 0
        self.k = [torch.zeros(batch_size, h, max_len, dk, device=device, dtype=dtype) for h, dk in shapes]
        self.v = [torch.zeros_like(k) for k in self.k]  # each [B, H_kv, max_len, d_k]

    def layer(self, i: int) -> LayerKV:
        return LayerKV(self, i)

    def advance(self, n: int) -> None:
        """Mark ``n`` more positions as filled (after every layer has written them)."""
        self.length += n

    def nbytes(self, length: int | None = None) -> int:
        """Bytes of keys and values held for ``length`` positions (default: the filled ones)."""
        n = self.length if length is None else length
        return sum(2 * k[:, :, :n].numel() * k.element_size() for k in self.k)


class LayerKV:
    """One layer's view of a :class:`KVCache`: writes new keys/values after the filled positions."""

    def __init__(self, cache: KVCache, index: int):
        self.cache, self.index = cache, index

    def update(self, k: torch.Tensor, v: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Store ``k, v`` ``[B, H_kv, T, d_k]`` at the next ``T`` positions; return all ``S`` positions."""
        c, start, T = self.cache, self.cache.length, k.shape[2]
        if start + T > c.max_len:
            raise ConfigError(
                f"the kv cache holds {c.max_len} positions and {start} are filled; "
                f"it has no room for {T} more (make the cache longer)."
            )
        kbuf, vbuf = c.k[self.index], c.v[self.index]
        kbuf[:, :, start : start + T] = k
        vbuf[:, :, start : start + T] = v
        return kbuf[:, :, : start + T], vbuf[:, :, : start + T]


class MultiHeadAttention(nn.Module):
    """Multi-head (grouped-query, multi-query) self-attention over ``[B, T, d_model]``.

    Args:
        d_model: input and output width; must be divisible by ``n_heads`` unless ``head_dim`` is given.
        n_heads: number of query heads.
        n_kv_heads: number of key/value heads, dividing ``n_heads`` (default: ``n_heads``).
        head_dim: width of every head (default ``d_model // n_heads``); projections are
            ``n_heads x head_dim`` wide.
        impl: ``"fused"``, ``"merged"`` or ``"serial"`` (see the module docstring).
        bias: whether the projections have biases.
        dropout: dropout on the attention probabilities while training.
        causal: each position attends only to itself and earlier positions (a language model).
    """

    def __init__(
        self,
        d_model: int,
        n_heads: int,
        *,
        n_kv_heads: int | None = None,
        head_dim: int | None = None,
        impl: str = "fused",
        bias: bool = True,
        dropout: float = 0.0,
        causal: bool = False,
    ):
        super().__init__()
        if head_dim is None:
            if n_heads < 1 or d_model % n_heads:
                raise ConfigError(
                    f"d_model={d_model} is not divisible by n_heads={n_heads}; d_k must be an integer."
                )
            head_dim = d_model // n_heads
        elif n_heads < 1 or head_dim < 1:
            raise ConfigError(f"need n_heads >= 1 and head_dim >= 1, got {n_heads}, {head_dim}.")
        n_kv_heads = n_heads if n_kv_heads is None else n_kv_heads
        if n_kv_heads < 1 or n_heads % n_kv_heads:
            valid = [k for k in range(1, n_heads + 1) if n_heads % k == 0]
            raise ConfigError(
                f"n_kv_heads={n_kv_heads} does not divide n_heads={n_heads}; "
                f"choose from {', '.join(map(str, valid))}."
            )
        if impl not in ATTENTION_IMPLS:
            raise ConfigError(f"attention impl must be one of {', '.join(ATTENTION_IMPLS)}, got {impl!r}.")
        self.d_model, self.n_heads, self.n_kv_heads, self.d_k = d_model, n_heads, n_kv_heads, head_dim
        self.impl, self.dropout, self.causal = impl, dropout, causal
        self.probe_mask: torch.Tensor | None = None  # [n_heads], set by explorer.measure._probe
        self.probe_maps: list[torch.Tensor] | None = None  # filled with [B, H, T, S] while set (probes)
        inner, kv_inner = n_heads * head_dim, n_kv_heads * head_dim
        self.qkv = nn.Linear(d_model, inner + 2 * kv_inner, bias=bias)  # rows: [W_Q; W_K; W_V]
        self.proj = nn.Linear(inner, d_model, bias=bias)  # W_O

    @property
    def group(self) -> int:
        """Query heads per key/value head."""
        return self.n_heads // self.n_kv_heads

    def _impl_for(self, need_weights: bool) -> str:
        # The fused kernel never materializes the attention matrix, so asking for it selects the merged path.
        return "merged" if need_weights and self.impl == "fused" else self.impl

    def forward(
        self,
        x: torch.Tensor,
        head_mask: torch.Tensor | None = None,
        need_weights: bool = False,
        kv: LayerKV | None = None,
    ) -> tuple[torch.Tensor, torch.Tensor | None]:
        """Attend over ``x`` (and, with ``kv``, over the cached positions before it).

        Args:
            x: ``[B, T, d_model]``.
            head_mask: optional ``[n_heads]`` multiplier on each query head's output (0 removes a head; its
                gradient is the head-importance signal of Michel et al., 2019).
            need_weights: also return the attention probabilities ``[B, n_heads, T, S]``.
            kv: this layer's view of a :class:`KVCache`: ``x``'s keys and values are appended to it and the
                queries attend over all ``S`` cached positions (the caller advances the cache).

        Returns:
            ``(y, weights)``: ``y`` is ``[B, T, d_model]``; ``weights`` is None unless asked for.
        """
        head_mask = self.probe_mask if head_mask is None else head_mask
        need_weights = need_weights or self.probe_maps is not None
        impl = self._impl_for(need_weights)
        if impl == "serial":
            y, weights = self._serial(x, head_mask, need_weights, kv)
        else:
            y, weights = self._batched(x, head_mask, kv, fused=impl == "fused")
        if self.probe_maps is not None and weights is not None:  # weights are always asked for then
            self.probe_maps.append(weights)
        return self.proj(y), weights

    def _mask(self, T: int, S: int, device: torch.device) -> torch.Tensor | None:
        """The ``[T, S]`` visibility mask, or None where every query sees every key."""
        if not self.causal or T == 1:
            return None
        return causal_mask(T, S, device)

    def _batched(
        self, x: torch.Tensor, head_mask: torch.Tensor | None, kv: LayerKV | None, fused: bool
    ) -> tuple[torch.Tensor, torch.Tensor | None]:
        B, T, C = x.shape
        H, Hkv, dk = self.n_heads, self.n_kv_heads, self.d_k
        inner, kv_inner = H * dk, Hkv * dk
        qkv = self.qkv(x)  # [B, T, inner + 2 kv_inner]
        # Slicing the last dimension and splitting it into heads is a view: for H = H_kv these are the strides
        # a [B, T, 3, H, dk] permute gives, so the multi-head path is the one it always was.
        q = qkv[..., :inner].view(B, T, H, dk).transpose(1, 2)  # [B, H, T, dk]
        k = qkv[..., inner : inner + kv_inner].view(B, T, Hkv, dk).transpose(1, 2)  # [B, Hkv, T, dk]
        v = qkv[..., inner + kv_inner :].view(B, T, Hkv, dk).transpose(1, 2)  # [B, Hkv, T, dk]
        if kv is not None:
            k, v = kv.update(k, v)  # [B, Hkv, S, dk]
        S = k.shape[2]
        mask = self._mask(T, S, x.device)
        p = self.dropout if self.training else 0.0
        weights = None
        if fused:
            kw: dict = {}
            if Hkv != H:
                if _SDPA_GQA:
                    kw["enable_gqa"] = True
                else:
                    k, v = k.repeat_interleave(self.group, 1), v.repeat_interleave(self.group, 1)
            if mask is not None and S == T:
                kw["is_causal"] = True  # no cache before these queries: the kernel's own causal path
            elif mask is not None:
                kw["attn_mask"] = mask
            y = F.scaled_dot_product_attention(q, k, v, dropout_p=p, **kw)  # [B, H, T, dk]
        else:
            # The G query heads sharing a key/value head become G x T rows of one matmul against it, so the
            # keys and values are read once per group, never copied G times (a broadcast matmul would).
            G = self.group
            qg = q.unflatten(1, (Hkv, G)).flatten(2, 3)  # [B, Hkv, G*T, dk]
            scores = ((qg @ k.transpose(-2, -1)) / math.sqrt(dk)).unflatten(2, (G, T))  # [B, Hkv, G, T, S]
            if mask is not None:
                scores = scores.masked_fill(~mask, float("-inf"))
            att = torch.softmax(scores, dim=-1)  # [B, Hkv, G, T, S]
            y = (F.dropout(att, p).flatten(2, 3) @ v).unflatten(2, (G, T)).flatten(1, 2)  # [B, H, T, dk]
            weights = att.flatten(1, 2)  # [B, H, T, S]
        if head_mask is not None:
            y = y * head_mask.view(1, H, 1, 1)
        # [B, H, T, dk] -> [B, T, H, dk] is not contiguous, so reshape (not view) copies before merging heads.
        return y.transpose(1, 2).reshape(B, T, inner), weights

    def _serial(
        self, x: torch.Tensor, head_mask: torch.Tensor | None, need_weights: bool, kv: LayerKV | None
    ) -> tuple[torch.Tensor, torch.Tensor | None]:
        T = x.shape[1]
        H, Hkv, dk = self.n_heads, self.n_kv_heads, self.d_k
        inner, kv_inner = H * dk, Hkv * dk
        w, b = self.qkv.weight, self.qkv.bias

        def project(rows: slice) -> torch.Tensor:
            return F.linear(x, w[rows], None if b is None else b[rows])  # [B, T, dk]

        # Each key/value head once, from its own slice of W_K and W_V.
        ks = [project(slice(inner + g * dk, inner + (g + 1) * dk)) for g in range(Hkv)]
        vs = [project(slice(inner + kv_inner + g * dk, inner + kv_inner + (g + 1) * dk)) for g in range(Hkv)]
        if kv is not None:
            k_all, v_all = kv.update(torch.stack(ks, 1), torch.stack(vs, 1))  # each [B, Hkv, S, dk]
            ks, vs = list(k_all.unbind(1)), list(v_all.unbind(1))  # each [B, S, dk]
        mask = self._mask(T, ks[0].shape[1], x.device)
        p = self.dropout if self.training else 0.0
        outs, maps = [], []
        for h in range(H):
            q = project(slice(h * dk, (h + 1) * dk))  # [B, T, dk]
            k, v = ks[h // self.group], vs[h // self.group]  # the key/value head this query head shares
            scores = (q @ k.transpose(-2, -1)) / math.sqrt(dk)  # [B, T, S]
            if mask is not None:
                scores = scores.masked_fill(~mask, float("-inf"))
            att = torch.softmax(scores, dim=-1)  # [B, T, S]
            y = F.dropout(att, p) @ v  # [B, T, dk]
            outs.append(y if head_mask is None else y * head_mask[h])
            if need_weights:
                maps.append(att)
        weights = torch.stack(maps, dim=1) if need_weights else None  # [B, H, T, S]
        return torch.cat(outs, dim=-1), weights  # [B, T, inner]


def set_attention_impl(module: _M, impl: str) -> _M:
    """Switch every :class:`MultiHeadAttention` inside ``module`` to ``impl`` (weights are unchanged)."""
    if impl not in ATTENTION_IMPLS:
        raise ConfigError(f"attention impl must be one of {', '.join(ATTENTION_IMPLS)}, got {impl!r}.")
    for m in module.modules():
        if isinstance(m, MultiHeadAttention):
            m.impl = impl
    return module


def attention_flops(
    batch: int,
    seq_len: int,
    d_model: int,
    n_heads: int | None = None,
    n_kv_heads: int | None = None,
    head_dim: int | None = None,
    kv_len: int | None = None,
) -> int:
    """Multiply-adds x2 of one self-attention forward: Q/K/V and output projections plus QK^T and AV.

    With the default shape the head count does not change the FLOPs (it only splits the same work into smaller
    matmuls), which is exactly why the tutorial's speed differences are about how the work is scheduled, not how
    much there is. Fewer key/value heads shrink the K/V projections; ``head_dim`` sets the projection width
    ``n_heads x head_dim``. ``kv_len`` is how many positions each query attends over (default ``seq_len``; a
    decoding step is ``seq_len=1, kv_len=context+1``). A causal mask is not credited (the full score matrix is
    counted, as the kernels compute it).
    """
    if n_heads is None and (n_kv_heads is not None or head_dim is not None):
        raise ConfigError("attention_flops needs n_heads when n_kv_heads or head_dim is given.")
    inner = d_model if head_dim is None else n_heads * head_dim  # type: ignore[operator]
    kv_inner = inner if n_kv_heads is None else n_kv_heads * (inner // n_heads)  # type: ignore[operator]
    S = seq_len if kv_len is None else kv_len
    projections = (
        2 * batch * seq_len * d_model * (inner + 2 * kv_inner) + 2 * batch * seq_len * inner * d_model
    )
    scores_and_values = 2 * 2 * batch * seq_len * S * inner
    return projections + scores_and_values
