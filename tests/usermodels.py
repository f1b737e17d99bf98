"""Model builders written the way a user would (some deliberately wrong), for the [model] build tests.

Tests name them by file path (``tests/usermodels.py:NAME``), as a user's spec would.
"""

from __future__ import annotations

import os
import time

import torch
from torch import nn

import explorer


class _Net(nn.Module):
    """Features [B, T, F] -> linear embedding + positions -> attention layers -> mean pool -> logits."""

    def __init__(self, layout, spec, attn, out=None):
        super().__init__()
        self.embed = nn.Linear(spec.n_features, layout.d_model)
        self.pos = nn.Parameter(torch.randn(1, spec.seq_len, layout.d_model) * 0.02)
        self.layers = nn.ModuleList(attn(layout, i) for i in range(layout.n_layers))
        self.norm = nn.LayerNorm(layout.d_model)
        self.head = nn.Linear(layout.d_model, out or spec.n_classes)

    def forward(self, x):
        h = self.embed(x) + self.pos
        for layer in self.layers:
            y = layer(h, h, h)[0] if isinstance(layer, nn.MultiheadAttention) else layer(h)[0]
            h = h + y
        return self.head(self.norm(h).mean(1))


def good(layout, spec):
    """explorer.MultiHeadAttention with the layout's heads, key/value heads and widths."""
    return _Net(
        layout,
        spec,
        lambda lo, i: explorer.MultiHeadAttention(
            lo.d_model, lo.heads[i], n_kv_heads=lo.kv_per_layer[i], head_dim=lo.d_k[i]
        ),
    )


def needs_its_environment(layout, spec):
    """:func:`good`, in a process whose environment has ``EXPLORER_TEST_WORKER_ENV`` set; else an error (the
    trial fails): a worker sees the environment of the command that started it."""
    if os.environ.get("EXPLORER_TEST_WORKER_ENV") != "1":
        raise RuntimeError("EXPLORER_TEST_WORKER_ENV is not set in this worker")
    return good(layout, spec)


_TRAINED: list[bool] = []  # one entry per model of this process that trained past its third batch


def stalls_its_second_training(layout, spec):
    """:func:`good`, except that the second model this process trains sleeps ``EXPLORER_TEST_STALL`` seconds
    (unset: none) before each training batch, until the file ``EXPLORER_TEST_STALL_UNTIL`` names (if set)
    exists: the fault tests' victim stays running, with its latency and heartbeat stored, until they kill or
    interrupt it, while every other trial (the one before it, a retry by a resume, which does not set the
    variable, a survivor's once the test has made the file) trains at full speed. Check and timing passes run
    in eval mode and do not count."""
    net = good(layout, spec)
    seconds = float(os.environ.get("EXPLORER_TEST_STALL", "0")) if len(_TRAINED) == 1 else 0.0
    release = os.environ.get("EXPLORER_TEST_STALL_UNTIL")
    steps = 0

    def stall(module: nn.Module, args: tuple) -> None:
        nonlocal steps
        if module.training and torch.is_grad_enabled():
            steps += 1
            if steps == 3:
                _TRAINED.append(True)
            if seconds and not (release and os.path.exists(release)):
                time.sleep(seconds)

    net.register_forward_pre_hook(stall)
    return net


def torch_mha(layout, spec):
    """torch.nn.MultiheadAttention with the layout's heads."""
    return _Net(layout, spec, lambda lo, i: nn.MultiheadAttention(lo.d_model, lo.heads[i], batch_first=True))


def fixed_heads(layout, spec):
    """Ignores the layout: 4 heads in every layer, whatever is asked."""
    return _Net(layout, spec, lambda lo, i: explorer.MultiHeadAttention(lo.d_model, 4))


def wrong_shape(layout, spec):
    return _Net(
        layout,
        spec,
        lambda lo, i: explorer.MultiHeadAttention(lo.d_model, lo.heads[i]),
        out=spec.n_classes + 1,
    )


class _NaN(nn.Module):
    def __init__(self, net):
        super().__init__()
        self.net = net

    def forward(self, x):
        return self.net(x) * float("nan")


def nan_logits(layout, spec):
    return _NaN(good(layout, spec))


class _Mixer(nn.Module):
    """No attention explorer can read: an MLP over positions."""

    def __init__(self, layout, spec, declare):
        super().__init__()
        self.net = nn.Sequential(nn.Flatten(), nn.Linear(spec.seq_len * spec.n_features, spec.n_classes))
        if declare:
            self.explorer_heads = list(layout.heads)

    def forward(self, x):
        return self.net(x)


def undeclared(layout, spec):
    return _Mixer(layout, spec, declare=False)


def declared(layout, spec):
    return _Mixer(layout, spec, declare=True)


def raises(layout, spec):
    raise ValueError("unsupported width")


def not_a_module(layout, spec):
    return "a model"
