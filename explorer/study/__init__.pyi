"""The public surface of :mod:`explorer.study` (read by type checkers, and by its __init__ at run time)."""

from ._artifacts import (
    ArtifactStore as ArtifactStore,
    artifact_store as artifact_store,
    store_for as store_for,
)
from ._catalog import list_studies as list_studies, study_status as study_status
from ._code_record import CODE_ATTR as CODE_ATTR, check_code as check_code
from ._mlflow_tracking import log_answer as log_answer
from ._model_builder import model_builder as model_builder
from ._progress import Step as Step, StopReason as StopReason
from ._retrain import record_task as record_task, trained_model as trained_model
from ._run_options import WORKERS_ATTR as WORKERS_ATTR, RunOptions as RunOptions
from ._run_plan import StudyRunPlan as StudyRunPlan, plan_run as plan_run
from ._runs import RunSummary as RunSummary, confirm as confirm, run as run, run_study as run_study
from ._spec_view import resolved_spec as resolved_spec
from ._study import Study as Study, existing_study_url as existing_study_url
from ._user_code_check import INPUT_ATTR as INPUT_ATTR
