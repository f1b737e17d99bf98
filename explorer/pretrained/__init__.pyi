"""The public surface of :mod:`explorer.pretrained` (read by type checkers, and by its __init__ at run time)."""

from ._builder import (
    IMPORTANCE_EXAMPLES as IMPORTANCE_EXAMPLES,
    PretrainedBuilder as PretrainedBuilder,
    PretrainedModel as PretrainedModel,
)
from ._checkpoint import MODELING_FILE as MODELING_FILE, save_shrunk as save_shrunk
from ._cost import HeadCost as HeadCost, head_cost as head_cost
from ._importance import (
    HeadImportance as HeadImportance,
    global_plan as global_plan,
    head_importance as head_importance,
    plan_by_importance as plan_by_importance,
)
from ._layout import HeadLayout as HeadLayout, head_layout as head_layout
from ._load import (
    Checkpoint as Checkpoint,
    inspect_checkpoint as inspect_checkpoint,
    load_checkpoint as load_checkpoint,
)
from ._plan import HeadPlan as HeadPlan, check_plan as check_plan
from ._recover import (
    Examples as Examples,
    Recovery as Recovery,
    RecoveryResult as RecoveryResult,
    accuracy as accuracy,
    as_examples as as_examples,
    cross_entropy as cross_entropy,
    distillation_gap as distillation_gap,
    recover as recover,
)
from ._surgery import shrink as shrink
