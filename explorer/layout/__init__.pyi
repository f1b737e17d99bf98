"""The public surface of :mod:`explorer.layout` (read by type checkers, and by its __init__ at run time)."""

from ._config import (
    ATTENTION_IMPLS as ATTENTION_IMPLS,
    DEVICE_CHOICES as DEVICE_CHOICES,
    DEVICE_NAMES as DEVICE_NAMES,
    LATENCY_DTYPES as LATENCY_DTYPES,
    LATENCY_RUNTIMES as LATENCY_RUNTIMES,
    MAX_FOLDS as MAX_FOLDS,
    DecodeConfig as DecodeConfig,
    InputSpec as InputSpec,
    LatencyConfig as LatencyConfig,
    ModelConfig as ModelConfig,
    TrainConfig as TrainConfig,
)
from ._counting import count_layouts as count_layouts
from ._hf_families import (
    HEAD_KEYS as HEAD_KEYS,
    HF_FAMILIES as HF_FAMILIES,
    HF_TYPES as HF_TYPES,
    TASK_KEYS as TASK_KEYS,
    HFFamily as HFFamily,
    canonical_key as canonical_key,
)
from ._layouts import (
    candidate_heads as candidate_heads,
    kv_layout as kv_layout,
    kv_param_names as kv_param_names,
    kv_params as kv_params,
    pick as pick,
)
from ._schedules import (
    SCHEDULE_FAMILIES as SCHEDULE_FAMILIES,
    expand_schedule as expand_schedule,
    valid_head_pairs as valid_head_pairs,
    valid_heads as valid_heads,
    valid_kv_heads as valid_kv_heads,
)
from ._space_spec import (
    FACTORS as FACTORS,
    Combo as Combo,
    SpaceSpec as SpaceSpec,
    check_space as check_space,
    head_counts as head_counts,
    realisable_families as realisable_families,
    space_combos as space_combos,
)
from ._units import (
    UNIT_OFFSET as UNIT_OFFSET,
    FinalistRun as FinalistRun,
    Purpose as Purpose,
    fold_seed as fold_seed,
    search_seed as search_seed,
    unit_seed as unit_seed,
)
