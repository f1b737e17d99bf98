"""The public surface of :mod:`explorer.measure` (read by type checkers, and by its __init__ at run time)."""

from ._attention_bench import bench_attention as bench_attention
from ._bench_plan import plan_bench as plan_bench
from ._decode import decode_latency as decode_latency
from ._device import (
    as_device as as_device,
    auto_device as auto_device,
    cpu_model_name as cpu_model_name,
    device_label as device_label,
    resolve_device as resolve_device,
)
from ._evaluate import (
    VariantFailed as VariantFailed,
    VariantResult as VariantResult,
    evaluate_variant as evaluate_variant,
    train_planned as train_planned,
    train_variant as train_variant,
)
from ._latency import (
    deployment_spec as deployment_spec,
    model_latency as model_latency,
    random_input as random_input,
    time_call as time_call,
    time_forward as time_forward,
)
from ._latency_cache import (
    CachePolicy as CachePolicy,
    LatencyCache as LatencyCache,
    describe_age as describe_age,
    result_age_s as result_age_s,
)
from ._model_bench import bench_model as bench_model
from ._pretrained_latency import (
    pretrained_decode_latency as pretrained_decode_latency,
    pretrained_latency as pretrained_latency,
)
from ._probe import (
    attention_maps as attention_maps,
    attention_statistics as attention_statistics,
    head_counts as head_counts,
    head_importance as head_importance,
    masked_accuracy as masked_accuracy,
    masking_curves as masking_curves,
    relation_specialization as relation_specialization,
    unpatchify as unpatchify,
)
from ._runconfig import (
    RunConfig as RunConfig,
    load_run_config as load_run_config,
    write_run_config as write_run_config,
)
from ._train import EpochStats as EpochStats, fit as fit
from ._train_plan import plan_train as plan_train
