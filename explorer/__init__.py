"""explorer: how many attention heads, per layer, should your Transformer have, on your task and device?

The package builds encoder variants under the head rules (:mod:`explorer.engine.config`), trains them on real tasks
(:mod:`explorer.engine.tasks`, :mod:`explorer.engine.train`), times them on the device (:mod:`explorer.engine.latency`), searches the
accuracy/latency trade-off with Optuna (:mod:`explorer.search.study`) and reports what to pick (:mod:`explorer.output.report`).
Submodules import torch and optuna; this top level does not, so the command line starts instantly.
"""

from __future__ import annotations

from importlib.metadata import PackageNotFoundError, version

try:
    __version__ = version("explorer")
except PackageNotFoundError:  # running from a source tree that was not installed
    __version__ = "0.0.0+unknown"

__all__ = ["__version__"]
