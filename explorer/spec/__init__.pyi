"""The public surface of :mod:`explorer.spec` (read by type checkers, and by its __init__ at run time)."""

from ._fidelity import (
    EarlyStoppingSpec as EarlyStoppingSpec,
    Peer as Peer,
    Verdict as Verdict,
    dominated_at_rung as dominated_at_rung,
    tie_tolerance as tie_tolerance,
)
from ._goals import MB as MB, TaskSpec as TaskSpec
from ._overrides import SOURCES_ATTR as SOURCES_ATTR, spec_rows as spec_rows
from ._search_space import Sampled as Sampled, SearchSpace as SearchSpace
from ._spec import load_spec as load_spec, spec_from_dict as spec_from_dict
from ._study_spec import SAMPLERS as SAMPLERS, StudySpec as StudySpec
from ._tracking_spec import tracking_uri as tracking_uri
