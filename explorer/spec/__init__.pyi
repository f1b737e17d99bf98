"""The public surface of :mod:`explorer.spec` (read by type checkers, and by its __init__ at run time)."""

from ._docs import TOP_LEVEL as TOP_LEVEL, marked_tables as marked_tables, spec_reference as spec_reference
from ._fidelity import (
    EarlyStoppingSpec as EarlyStoppingSpec,
    Peer as Peer,
    Verdict as Verdict,
    dominated_at_rung as dominated_at_rung,
    tie_tolerance as tie_tolerance,
)
from ._goals import MB as MB, TASK_KINDS as TASK_KINDS, TaskSpec as TaskSpec
from ._keys import SPEC_KEYS as SPEC_KEYS, TABLE_CLASSES as TABLE_CLASSES, TABLES as TABLES
from ._overrides import SOURCES_ATTR as SOURCES_ATTR, parse_override as parse_override, spec_rows as spec_rows
from ._search_space import Sampled as Sampled, SearchSpace as SearchSpace
from ._spec import load_spec as load_spec, spec_from_dict as spec_from_dict
from ._study_spec import SAMPLERS as SAMPLERS, StudySpec as StudySpec
from ._toml import read_table as read_table
from ._tracking_spec import MLFLOW_ENV as MLFLOW_ENV, tracking_uri as tracking_uri
