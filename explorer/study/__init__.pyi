"""The public surface of :mod:`explorer.study` (read by type checkers, and by its __init__ at run time)."""

from ._artifacts import (
    ArtifactStore as ArtifactStore,
    artifact_root_for as artifact_root_for,
    artifact_store as artifact_store,
    open_backend as open_backend,
    store_for as store_for,
)
from ._catalog import (
    INSIDE_NOTE as INSIDE_NOTE,
    list_studies as list_studies,
    study_status as study_status,
)
from ._claims import Claims as Claims, pop_waiting as pop_waiting
from ._code_record import check_code as check_code
from ._mlflow_tracking import log_answer as log_answer, sync_trials as sync_trials
from ._progress import Step as Step, StopReason as StopReason
from ._rerun import differences as differences
from ._retime import retime as retime
from ._retrain import record_task as record_task, trained_model as trained_model
from ._run_options import RunOptions as RunOptions, check_total as check_total
from ._run_plan import (
    PortableStudyRunPlan as PortableStudyRunPlan,
    StudyRunPlan as StudyRunPlan,
    check_rerun as check_rerun,
    plan_run as plan_run,
)
from ._runs import RunSummary as RunSummary, confirm as confirm, run as run, run_study as run_study
from ._sampling import (
    UniqueSampler as UniqueSampler,
    make_sampler as make_sampler,
    suggest_readable as suggest_readable,
)
from ._spec_view import resolved_spec as resolved_spec
from ._study import (
    ANSWER_ATTR as ANSWER_ATTR,
    Study as Study,
    existing_study_url as existing_study_url,
)
from ._trial import ClosedTrial as ClosedTrial, Objective as Objective, TrialFailed as TrialFailed
from ._user_code_check import INPUT_ATTR as INPUT_ATTR
from ._workers import enqueue_runs as enqueue_runs, run_stage as run_stage
