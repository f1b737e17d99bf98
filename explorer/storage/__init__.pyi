"""The public surface of :mod:`explorer.storage` (read by type checkers, and by its __init__ at run time)."""

from ._companion import (
    FINALIST_BASE as FINALIST_BASE,
    companion_name as companion_name,
    find_companion as find_companion,
    label_companion as label_companion,
    local_number as local_number,
    number_base as number_base,
    parent_name as parent_name,
    study_parts as study_parts,
    trial_label as trial_label,
    trials_of as trials_of,
)
from ._heartbeat import fail_dead_trials as fail_dead_trials
from ._locations import (
    ARTIFACTS_ENV as ARTIFACTS_ENV,
    STORAGE_ENV as STORAGE_ENV,
    check_artifact_location as check_artifact_location,
    env_artifact_location as env_artifact_location,
)
from ._optuna_private import (
    enqueued_params as enqueued_params,
    install_pop_waiting as install_pop_waiting,
    optuna_pop_waiting as optuna_pop_waiting,
    rdb_storage as rdb_storage,
    report_epoch as report_epoch,
    set_stored_param as set_stored_param,
    storage_of as storage_of,
    study_id_of as study_id_of,
    trial_id_of as trial_id_of,
    trials_table as trials_table,
)
from ._record import (
    DONE_STATES as DONE_STATES,
    RETIMED_ATTR as RETIMED_ATTR,
    Retiming as Retiming,
    TrialRecord as TrialRecord,
    arch_key as arch_key,
    closed_counts as closed_counts,
    closure_of as closure_of,
    epochs_done as epochs_done,
    finalist_attrs as finalist_attrs,
    finalist_run as finalist_run,
    is_bookkeeping as is_bookkeeping,
    keeps_finalists_inside as keeps_finalists_inside,
    load_records as load_records,
    load_retimings as load_retimings,
    proposal_of as proposal_of,
    record_from_trial as record_from_trial,
    retry_attrs as retry_attrs,
    role_of as role_of,
    seed_of as seed_of,
    write as write,
)
from ._storage import (
    check_study_name as check_study_name,
    default_storage_url as default_storage_url,
    mask_url as mask_url,
    open_storage as open_storage,
    resolve_storage_url as resolve_storage_url,
    sqlite_path as sqlite_path,
    storage_writable as storage_writable,
    study_exists as study_exists,
)
from ._trial_kinds import (
    Closure as Closure,
    Proposal as Proposal,
    Role as Role,
    TimingKind as TimingKind,
)
