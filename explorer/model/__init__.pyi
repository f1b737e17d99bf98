"""The public surface of :mod:`explorer.model` (read by type checkers, and by its __init__ at run time)."""

from ._attention import (
    KVCache as KVCache,
    MultiHeadAttention as MultiHeadAttention,
    attention_flops as attention_flops,
    set_attention_impl as set_attention_impl,
)
from ._export_files import (
    EXPORT_VERSION as EXPORT_VERSION,
    FORMAT_SUFFIX as FORMAT_SUFFIX,
    META_KEY as META_KEY,
    PT2_EXTRA as PT2_EXTRA,
    Exported as Exported,
    declared_config as declared_config,
    load_exported as load_exported,
    logit_parity as logit_parity,
    pt2_archive_constants as pt2_archive_constants,
)
from ._footprint import (
    Shape as Shape,
    attention_bytes as attention_bytes,
    check_config_limits as check_config_limits,
    check_model_fits as check_model_fits,
    inference_bytes as inference_bytes,
    training_bytes as training_bytes,
)
from ._hfmodel import (
    HFBuilder as HFBuilder,
    HFModel as HFModel,
    hf_decode_step as hf_decode_step,
    hf_inputs as hf_inputs,
    quiet_transformers as quiet_transformers,
    require_transformers as require_transformers,
)
from ._model import Block as Block, CausalLM as CausalLM, build_model as build_model, model_cost as model_cost
from ._runtime import (
    check_runtime as check_runtime,
    onnx_bytes as onnx_bytes,
    prepare_runner as prepare_runner,
    quiet_torch as quiet_torch,
    require_onnx as require_onnx,
    runtime_version as runtime_version,
)
from ._usermodel import CHECK_BATCH as CHECK_BATCH, ModelBuilder as ModelBuilder, check_model as check_model
