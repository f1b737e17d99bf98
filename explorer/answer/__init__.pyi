"""The public surface of :mod:`explorer.answer` (read by type checkers, and by its __init__ at run time)."""

from ._account import StudyAccount as StudyAccount, study_account as study_account
from ._compare_fronts import (
    COMPARE_COLUMNS as COMPARE_COLUMNS,
    compare_fronts as compare_fronts,
    study_setup as study_setup,
)
from ._contrasts import Contrast as Contrast
from ._evidence_grid import Grid as Grid
from ._finalists import (
    COST_COLUMNS as COST_COLUMNS,
    FinalistPlan as FinalistPlan,
    busy_rounds as busy_rounds,
    check_runs as check_runs,
    cost_axis as cost_axis,
    decision_cost as decision_cost,
    evidence_units as evidence_units,
    finalist_times as finalist_times,
    next_round_size as next_round_size,
    next_runs as next_runs,
    pilot_layouts as pilot_layouts,
    pilot_runs as pilot_runs,
    plan_finalists as plan_finalists,
    rule_times as rule_times,
)
from ._horizon import (
    Horizon as Horizon,
    at_horizon as at_horizon,
    choose_horizon as choose_horizon,
    curve_plateaued as curve_plateaued,
    learning_curves as learning_curves,
    run_plateaued as run_plateaued,
)
from ._intervals import (
    Interval as Interval,
    accuracy_mean_ci as accuracy_mean_ci,
    median_ci as median_ci,
    proportion_ci as proportion_ci,
)
from ._latency_stats import block_spread as block_spread, latency_interval as latency_interval
from ._paired import PairedDifference as PairedDifference
from ._pareto import (
    HV_REFERENCE as HV_REFERENCE,
    front_mask as front_mask,
    hypervolume_2d as hypervolume_2d,
    hypervolume_history as hypervolume_history,
    knee as knee,
    knee_index as knee_index,
    pareto_front as pareto_front,
)
from ._recommend import (
    PICK_NAMES as PICK_NAMES,
    Answer as Answer,
    Candidate as Candidate,
    Evidence as Evidence,
    answer as answer,
    finalist_pace as finalist_pace,
    minutes_text as minutes_text,
    pick as pick,
    prob_text as prob_text,
    resolve_trial as resolve_trial,
    select_run as select_run,
)
from ._rule import (
    Verdict as Verdict,
    decide as decide,
    next_cells as next_cells,
    next_layouts as next_layouts,
    pair_risks as pair_risks,
    units_to_decide as units_to_decide,
)
from ._significance import (
    Comparison as Comparison,
    compare as compare,
    kendall_tau as kendall_tau,
    permutation_test as permutation_test,
    stratified_permutation_test as stratified_permutation_test,
)
from ._tables import (
    Architecture as Architecture,
    architecture_table as architecture_table,
    architectures as architectures,
    attention_kind as attention_kind,
    common_epoch as common_epoch,
    decode_only as decode_only,
    quality_margin as quality_margin,
)
from ._trials import csv_ready as csv_ready, trials_table as trials_table
from ._unit_groups import UnitComparison as UnitComparison, unit_comparison as unit_comparison
