"""The public surface of :mod:`explorer.answer` (read by type checkers, and by its __init__ at run time)."""

from ._account import StudyAccount as StudyAccount, study_account as study_account
from ._answer import Answer as Answer, Candidate as Candidate, Evidence as Evidence
from ._compare_fronts import compare_fronts as compare_fronts
from ._contrasts import Contrast as Contrast
from ._evidence_grid import Grid as Grid
from ._finalists import (
    FinalistPlan as FinalistPlan,
    Outlook as Outlook,
    busy_rounds as busy_rounds,
    check_runs as check_runs,
    cost_axis as cost_axis,
    finalist_pace as finalist_pace,
    next_round_size as next_round_size,
    next_runs as next_runs,
    pilot_layouts as pilot_layouts,
    pilot_runs as pilot_runs,
    plan_finalists as plan_finalists,
    rule_times as rule_times,
    stage_outlook as stage_outlook,
)
from ._forecast import Forecast as Forecast
from ._horizon import (
    Horizon as Horizon,
    HorizonBy as HorizonBy,
    at_horizon as at_horizon,
    choose_horizon as choose_horizon,
    curve_plateaued as curve_plateaued,
    learning_curves as learning_curves,
)
from ._intervals import Interval as Interval
from ._paired import PairedDifference as PairedDifference
from ._pareto import (
    HV_REFERENCE as HV_REFERENCE,
    front_mask as front_mask,
    hypervolume_2d as hypervolume_2d,
    hypervolume_history as hypervolume_history,
    knee_index as knee_index,
    pareto_front as pareto_front,
)
from ._pick import resolve_trial as resolve_trial
from ._recommend import answer as answer
from ._rule import Verdict as Verdict, decide as decide, next_cells as next_cells
from ._significance import Comparison as Comparison, compare as compare, kendall_tau as kendall_tau
from ._tables import (
    Architecture as Architecture,
    CostAxis as CostAxis,
    architecture_table as architecture_table,
    architectures as architectures,
    attention_kind as attention_kind,
    common_epoch as common_epoch,
    decode_only as decode_only,
    quality_margin as quality_margin,
)
from ._trials import csv_ready as csv_ready, trials_table as trials_table
from ._unit_groups import UnitComparison as UnitComparison, unit_comparison as unit_comparison
from ._words import minutes_text as minutes_text, prob_text as prob_text
