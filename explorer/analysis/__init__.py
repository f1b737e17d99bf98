"""Analyses that need trained weights: they load a trial's model (or retrain it) and probe it with torch.

Kept apart from :mod:`explorer.insight`, whose statistics over trial records import no torch.
"""

from explorer.analysis.trial_heads import HeadsAnalysis, analyse_heads

__all__ = ["HeadsAnalysis", "analyse_heads"]
