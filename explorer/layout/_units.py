"""The seeds a study's trials train with, and the finalist runs planned on the units of the evidence grid.

Every seed a study draws lies in a block of its own, ``[spec.seed * SEED_BLOCK, (spec.seed + 1) * SEED_BLOCK)``,
so two studies with different seeds share none (a re-run of a study with another seed is independent of it):
search trial ``n`` trains with the block's ``n``-th seed; evidence unit ``u`` (fold ``u % folds`` of replicate
``u // folds``, shared by every finalist layout: the pairing) with seed ``UNIT_OFFSET + u``; and replicate ``r``
cuts its cross-validation folds with seed ``FOLD_OFFSET + r``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from enum import Enum
from typing import Any, TypedDict

from explorer.layout._config import ModelConfig

SEED_BLOCK = 1_000_000
UNIT_OFFSET = 500_000  # search trial numbers stay below this (explorer.study._run_options.check_total refuses a total that reaches it)
FOLD_OFFSET = 900_000


def search_seed(study_seed: int, number: int) -> int:
    """The training seed of search trial ``number``."""
    return study_seed * SEED_BLOCK + number


def unit_seed(study_seed: int, unit: int) -> int:
    """The training seed of evidence unit ``unit`` (``replicate * folds + fold``), the same for every layout."""
    return study_seed * SEED_BLOCK + UNIT_OFFSET + unit


def fold_seed(study_seed: int, replicate: int) -> int:
    """The seed that cuts replicate ``replicate``'s cross-validation folds."""
    return study_seed * SEED_BLOCK + FOLD_OFFSET + replicate


class Purpose(str, Enum):
    """What a finalist run is for: the evidence grid, the pilot that chooses the grid's horizon (a pilot run at
    the chosen horizon is a grid run as well), or the check of the deciding comparison at a longer horizon."""

    GRID = "grid"
    PILOT = "pilot"
    CHECK = "horizon check"

    def __str__(self) -> str:
        return self.value


class _RunAttrs(TypedDict):
    model: dict[str, Any]  # ModelConfig.to_dict()
    lr: float
    label: str
    source: int | None


class FinalistAttrs(_RunAttrs, total=False):
    """What a queued finalist trial carries (:meth:`FinalistRun.attrs`): the fold keys where the run has a fold,
    the horizon and purpose where it has a horizon."""

    fold: int
    folds: int
    fold_seed: int | None
    epochs: int
    purpose: str


@dataclass(frozen=True)
class FinalistRun:
    """One planned finalist run: an architecture, its learning rate, its unit's seed, and its part in the plan."""

    config: ModelConfig
    lr: float
    seed: int
    label: str  # knee | front | 1 head | 8 heads | next faster ...
    source: int | None = None  # the search trial it comes from (None for a reference layout)
    fold: int | None = None  # which cross-validation fold it validates on (None: the task's fixed split)
    folds: int = 1  # how many folds its replicate is cut into
    fold_seed: int | None = None  # the seed that cut them
    # the horizon it trains (None: the spec's [finalists] epochs, as runs before pilots)
    epochs: int | None = None
    purpose: Purpose = Purpose.GRID

    def attrs(self) -> FinalistAttrs:
        """What the queued trial carries (its ``finalist`` user attribute)."""
        out: FinalistAttrs = {
            "model": self.config.to_dict(),
            "lr": self.lr,
            "label": self.label,
            "source": self.source,
        }
        if self.fold is not None:
            out |= {"fold": self.fold, "folds": self.folds, "fold_seed": self.fold_seed}
        if self.epochs is not None:
            out |= {"epochs": self.epochs, "purpose": self.purpose.value}
        return out

    @classmethod
    def from_attrs(cls, attrs: Mapping[str, Any], seed: int) -> FinalistRun:
        """The run a queued trial carries: its ``finalist`` user attribute (:meth:`attrs`) and its seed."""
        fold, source, fold_seed = attrs.get("fold"), attrs.get("source"), attrs.get("fold_seed")
        return cls(
            config=ModelConfig.from_dict(attrs["model"]),
            lr=float(attrs["lr"]),
            seed=seed,
            label=str(attrs.get("label", "")),
            source=None if source is None else int(source),
            fold=None if fold is None else int(fold),
            folds=int(attrs.get("folds", 1)),
            fold_seed=None if fold_seed is None else int(fold_seed),
            epochs=None if attrs.get("epochs") is None else int(attrs["epochs"]),
            purpose=Purpose(attrs.get("purpose", Purpose.GRID)),
        )
