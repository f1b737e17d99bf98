"""A spec's ``[model] pretrained`` checkpoint against its space and task, before any work (no torch, no
transformers: the checkpoint's ``config.json`` is read as JSON).

A trained model fixes everything but its heads, so :func:`pretrained_defaults` fills the ``[space]`` sizes from
the checkpoint where the space leaves them out: ``d_model`` (``hidden_size``), ``n_layers``, ``head_dim`` (every
head keeps its width: surgery removes heads, it does not reshape them), ``mlp_ratio``, the query-head candidates
(the divisors of the model's heads, its own count among them) and, for a model with grouped key/value heads
(Llama), the key/value-head candidates (the divisors of its key/value heads). :func:`check_pretrained` then
refuses, in one line naming the limit and the fix, what surgery cannot make: more heads, or more key/value heads,
than the model has (a head is removed or pooled, never made), key/value heads for BERT (none are grouped), sizes
that differ from the checkpoint's, a task of the other kind (a causal LM on a classification task, an encoder on
text), dropout and serial attention (a transformers model's own settings apply). The checkpoint itself (its weight
files, its size against this machine's memory) is checked again, whole, when a study is planned
(:func:`explorer.pretrained.inspect_checkpoint`).
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from explorer.errors import SpecError
from explorer.layout import SpaceSpec
from explorer.limits import check_file_size
from explorer.spec._goals import ModelSpec, TaskSpec

# model_type -> whether its model is a causal LM and whether it groups key/value heads (explorer.pretrained's)
_FAMILIES = {"llama": (True, True), "bert": (False, False)}
_STUDIED = (
    "LlamaForCausalLM",
    "BertForSequenceClassification",
)  # the classes a study scores (their predictions)
_FIX = "give the folder that save_pretrained wrote (config.json and model.safetensors)"


def read_config(path: str) -> dict[str, Any]:
    """The checkpoint's ``config.json`` as a dict; a one-line SpecError when it cannot be read."""
    folder = Path(path).expanduser()
    where = f"[model] pretrained = {path!r}"
    if not folder.is_dir():
        raise SpecError(f"{where}: no checkpoint folder there; {_FIX}.")
    file = folder / "config.json"
    if not file.is_file():
        raise SpecError(
            f"{where}: the folder holds no config.json, so it is not a transformers checkpoint; {_FIX}."
        )
    check_file_size(file, "a checkpoint's config.json")
    try:
        config = json.loads(file.read_text(encoding="utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise SpecError(f"{where}: config.json is not valid JSON ({exc}); re-save the checkpoint.") from None
    if not isinstance(config, dict):
        raise SpecError(f"{where}: config.json is not a JSON object; re-save the checkpoint.")
    if config.get("model_type") not in _FAMILIES:
        raise SpecError(
            f"{where}: model_type {config.get('model_type')!r} is an architecture whose attention heads explorer "
            f"cannot regroup; it can regroup {', '.join(sorted(_FAMILIES))} checkpoints."
        )
    return config


def _whole(config: dict[str, Any], name: str, path: str) -> int:
    value = config.get(name)
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise SpecError(
            f"[model] pretrained = {path!r}: config.json's {name} is {value!r}, not a positive whole number; "
            "re-save the checkpoint."
        )
    return value


def checkpoint_sizes(config: dict[str, Any], path: str) -> dict[str, int]:
    """hidden, layers, heads, kv_heads, head_dim and intermediate of the checkpoint's config."""
    hidden = _whole(config, "hidden_size", path)
    heads = _whole(config, "num_attention_heads", path)
    grouped = _FAMILIES[config["model_type"]][1] and config.get("num_key_value_heads") is not None
    return {
        "hidden": hidden,
        "layers": _whole(config, "num_hidden_layers", path),
        "heads": heads,
        "kv_heads": _whole(config, "num_key_value_heads", path) if grouped else heads,
        "head_dim": _whole(config, "head_dim", path) if config.get("head_dim") else hidden // heads,
        "intermediate": _whole(config, "intermediate_size", path),
    }


def _divisors(n: int) -> list[int]:
    return [d for d in range(1, n + 1) if n % d == 0]


def pretrained_defaults(model: ModelSpec, space: object, stored: bool = False) -> object:
    """``[space]`` with the checkpoint's sizes and head candidates where the space leaves them out (see the
    module docstring). A stored spec (its space already whole) is returned as it is: a report reads a study on a
    machine that may not hold the checkpoint."""
    if model.pretrained is None or stored or not isinstance(space, Mapping | type(None)):
        return space
    config = read_config(model.pretrained)
    sizes = checkpoint_sizes(config, model.pretrained)
    out = dict(space or {})
    out.setdefault("d_model", [sizes["hidden"]])
    out.setdefault("n_layers", [sizes["layers"]])
    out.setdefault("head_dim", [sizes["head_dim"]])
    out.setdefault("mlp_ratio", [sizes["intermediate"] / sizes["hidden"]])
    out.setdefault("heads", _divisors(sizes["heads"]))
    if _FAMILIES[config["model_type"]][1]:
        out.setdefault("kv_heads", _divisors(sizes["kv_heads"]))
    return out


def check_pretrained(model: ModelSpec, space: SpaceSpec, task: TaskSpec, stored: bool = False) -> None:
    """Refuse, in one line naming the limit and the fix, what surgery cannot make of the checkpoint (see the
    module docstring). Nothing for any other model, or for a stored spec."""
    if model.pretrained is None or stored:
        return
    path = model.pretrained
    config = read_config(path)
    sizes = checkpoint_sizes(config, path)
    causal, grouped = _FAMILIES[config["model_type"]]
    where = f"[model] pretrained ({config['model_type']}, {sizes['layers']} layers of {sizes['heads']} heads)"
    architecture = (config.get("architectures") or ["?"])[0]
    if architecture not in _STUDIED:
        raise SpecError(
            f"{where} is a {architecture}, and a study scores a model's predictions; give a "
            f"{' or '.join(_STUDIED)} checkpoint (a base model without a task head cannot be scored)."
        )
    lm = task.kind == "language_model"
    if causal and not lm:
        raise SpecError(
            f"{where} is a causal language model and task {task.name!r} classifies; use task text, or a BERT "
            "checkpoint for a classification task."
        )
    if lm and not causal:
        raise SpecError(
            f"{where} is an encoder classifier and task {task.name!r} is language modelling; use a classification "
            "task, or a Llama checkpoint for text."
        )
    for name, values, want in (
        ("d_model", space.d_model, sizes["hidden"]),
        ("n_layers", space.n_layers, sizes["layers"]),
        ("head_dim", space.head_dim or (), sizes["head_dim"]),
    ):
        if tuple(values) != (want,):
            raise SpecError(
                f"{where}: [space] {name} is {list(values)}, and the checkpoint's is {want}; surgery keeps the "
                f"model's sizes: remove {name} from [space]."
            )
    ratio = sizes["intermediate"] / sizes["hidden"]
    if len(space.mlp_ratio) != 1 or not math.isclose(space.mlp_ratio[0], ratio):
        raise SpecError(
            f"{where}: [space] mlp_ratio is {list(space.mlp_ratio)}, and the checkpoint's is {ratio:g}; remove "
            "mlp_ratio from [space]."
        )
    over = [h for h in space.heads if h > sizes["heads"]]
    if over:
        raise SpecError(
            f"{where}: [space] heads lists {over[0]}, more heads than a layer has; surgery removes heads, so give "
            f"counts from 1 to {sizes['heads']}."
        )
    if space.kv_heads is not None and not grouped:
        raise SpecError(
            f"{where}: BERT has a key/value head for each query head, none grouped; remove [space] kv_heads."
        )
    if space.kv_heads is not None:
        more = [k for k in space.kv_heads if k > sizes["kv_heads"]]
        if more:
            raise SpecError(
                f"{where}: [space] kv_heads lists {more[0]}, more key/value heads than the checkpoint's "
                f"{sizes['kv_heads']}; pooling groups heads, it makes none: give counts from 1 to {sizes['kv_heads']}."
            )
    if sizes["heads"] not in space.heads or "uniform" not in space.families:
        raise SpecError(
            f"{where}: the original model is always a candidate, so [space] heads must list its {sizes['heads']} "
            'and families "uniform"; add them.'
        )
    if grouped and space.kv_heads is not None and sizes["kv_heads"] not in space.kv_heads:
        raise SpecError(
            f"{where}: the original model is always a candidate, so [space] kv_heads must list its "
            f"{sizes['kv_heads']}; add it."
        )
    if space.dropout:
        raise SpecError(
            f"{where}: [space] dropout does not reach a trained model (its own config's does); remove it."
        )
    if space.attention == "serial":
        raise SpecError(
            f"{where}: transformers runs its heads as one product, never a loop over heads; set [space] attention = "
            '"fused" or "merged".'
        )
