"""explorer: how many attention heads, per layer, should your Transformer have, on your task and device?

The package builds encoder variants under the head rules (:mod:`explorer.layout`), trains them on real tasks
(:mod:`explorer.data`, :mod:`explorer.measure`), times them on the device and runtime they will ship
on (:mod:`explorer.measure`), searches the accuracy/latency trade-off with Optuna
(:mod:`explorer.study`) and reports what to pick (:mod:`explorer.output`).

The workflows of :mod:`explorer.api` are available here, imported on first use, so ``import explorer`` stays
instant (no torch, no Optuna until a workflow is called)::

    >>> import explorer
    >>> explorer.run_study("studies/quickstart.toml")       # run (or resume) a study to its total
    >>> df = explorer.trials("quickstart")                  # its trials as a pandas DataFrame
    >>> explorer.recommend("quickstart").recommended.heads  # the head-count answer, with its evidence
    >>> explorer.export("quickstart", "knee.onnx", format="onnx")

The other workflows: ``explorer.report`` (write the report), ``explorer.heads`` (analyse one trial's heads),
``explorer.compare`` (overlay several studies' fronts), ``explorer.confirm`` (more finalists or seeds) and
``explorer.load`` (a study's records, read-only); ``explorer.RunOptions`` sets how ``run_study`` runs (workers,
threads, device, timeout).

For a model of your own (``[model] build = "mypkg.models:build"``), ``build(layout, spec)`` receives an
:class:`explorer.ModelConfig` (the layout: width, depth, heads per layer...) and an :class:`explorer.InputSpec`;
build its attention from :class:`explorer.MultiHeadAttention` (or ``torch.nn.MultiheadAttention``) so explorer
can check that each layer has the heads asked for.
"""

from __future__ import annotations

import importlib
from typing import Any

from explorer.meta import package_version

__version__ = package_version()

# name -> the surface it comes through (a package's __init__, or explorer.api); resolved on first attribute
# access (PEP 562)
_LAZY = {
    "run_study": "explorer.study",
    "trials": "explorer.api",
    "recommend": "explorer.api",
    "export": "explorer.api",
    "report": "explorer.api",
    "heads": "explorer.api",
    "compare": "explorer.api",
    "confirm": "explorer.study",
    "load": "explorer.api",
    "RunOptions": "explorer.study",
    # for your own model ([model] build): the attention explorer can read and analyse, and what a builder gets
    "MultiHeadAttention": "explorer.model",
    "ModelConfig": "explorer.layout",
    "InputSpec": "explorer.layout",
}

__all__ = ["__version__", *_LAZY]


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        value = getattr(importlib.import_module(_LAZY[name]), name)
        globals()[name] = value  # later look-ups skip this function
        return value
    raise AttributeError(f"module 'explorer' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(__all__)
