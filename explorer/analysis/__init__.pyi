"""The public surface of :mod:`explorer.analysis` (read by type checkers, and by its __init__ at run time)."""

from ._gqa import GQA_RULE as GQA_RULE, gqa_rule as gqa_rule, searches_kv as searches_kv
from ._groups import ALPHA as ALPHA, MIN_ARCHS as MIN_ARCHS
from ._heads import (
    REDUNDANT as REDUNDANT,
    SPECIALIZED as SPECIALIZED,
    TOLERANCE as TOLERANCE,
    HeadsReport as HeadsReport,
    specialized_heads as specialized_heads,
)
from ._relations_claim import relations_claim as relations_claim
from ._rules import (
    DK_FLOOR as DK_FLOOR,
    MIN_SPEEDUP as MIN_SPEEDUP,
    RuleVerdict as RuleVerdict,
    rules_of_thumb as rules_of_thumb,
)
from ._trial_heads import HeadsAnalysis as HeadsAnalysis, analyse_heads as analyse_heads
