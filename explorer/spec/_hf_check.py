"""A spec's ``[model] hf`` and ``config`` against its space and task, before any work (no torch, no transformers).

A transformers user writes the config for everything but the heads, so :func:`space_defaults` fills the
``[space]`` sizes the config already gives (``hidden_size``, ``num_hidden_layers``, ``intermediate_size`` as
``mlp_ratio``), and, where the class holds ``num_key_value_heads``, searches key/value heads from the head
candidates unless ``kv_heads`` is given. :func:`check_hf` then refuses, with one line naming the limit and the
fix, what the class cannot hold: a per-layer schedule (no stock class here holds one: ``families`` defaults to
``["uniform"]`` and any other family is refused), per-layer key/value heads, key/value heads or head widths in a
class without those fields, ``[space] dropout`` (the config's own dropout keys apply), serial attention, a
language model from a class that has none, a ViT timed at another length than its image's, the heads in
``config`` (they are what the study searches), and the task's sizes in ``config`` (vocabulary, labels, positions
and image come from the task). The divisibility and d_k rules are the space's own, checked as for explorer's
model.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from explorer.errors import SpecError
from explorer.layout import (
    HEAD_KEYS,
    HF_FAMILIES,
    HF_TYPES,
    TASK_KEYS,
    HFFamily,
    LatencyConfig,
    SpaceSpec,
    canonical_key,
)
from explorer.spec._goals import ModelSpec, TaskSpec


def family_of(model: ModelSpec) -> HFFamily:
    """The :class:`HFFamily` of ``[model] hf``; an unknown type is one SpecError listing the known ones."""
    family = HF_FAMILIES.get(str(model.hf))
    if family is None:
        raise SpecError(
            f"'hf' in [model] is {model.hf!r}, not a transformers model type explorer builds; choose one of "
            f"{', '.join(HF_TYPES)}."
        )
    return family


def _config(model: ModelSpec, family: HFFamily) -> dict[str, Any]:
    """The config with canonical key names; a key given twice (under both names) is refused."""
    out: dict[str, Any] = {}
    for key, value in model.config.items():
        name = canonical_key(family, key)
        if name in out:
            raise SpecError(f"[model] config gives {name!r} twice (as {key!r} too); keep one.")
        out[name] = value
    return out


def space_defaults(model: ModelSpec, space: object) -> object:
    """``[space]`` with the sizes the config gives filled in where the space leaves them out (see the module
    docstring); a space that is not a table is returned as it is, for the strict reader to name."""
    if model.hf is None or not isinstance(space, Mapping):
        return space
    family = family_of(model)
    config = _config(model, family)
    out = dict(space)
    for key, name in (("hidden_size", "d_model"), ("num_hidden_layers", "n_layers")):
        if name not in out and isinstance(config.get(key), int):
            out[name] = [config[key]]
    width = config.get("intermediate_size")
    if "mlp_ratio" not in out and isinstance(width, int) and isinstance(config.get("hidden_size"), int):
        out["mlp_ratio"] = [width / config["hidden_size"]]
    if family.kv_heads and "kv_heads" not in out and "heads" in out:
        out["kv_heads"] = out["heads"]  # grouped-query attention searched under the grouping rule
    if not family.per_layer and "families" not in out:
        out["families"] = ["uniform"]
    return out


def _one(values: tuple[Any, ...], key: str, space_key: str) -> Any:
    if len(values) != 1:
        raise SpecError(
            f"[model] config sets {key} but [space] {space_key} lists {len(values)} values; give the size in one "
            "place: remove it from config to search the space's values, or give [space] that one value."
        )
    return values[0]


def _check_sizes(config: dict[str, Any], space: SpaceSpec) -> None:
    """The layout's sizes the config repeats must be the space's one value."""
    checks = (
        ("hidden_size", space.d_model, "d_model", lambda v: v),
        ("num_hidden_layers", space.n_layers, "n_layers", lambda v: v),
        ("head_dim", space.head_dim or (), "head_dim", lambda v: v),
    )
    for key, values, space_key, _ in checks:
        if key in config:
            if not values:
                raise SpecError(f"[model] config sets {key}; give it as [space] {space_key} instead.")
            if config[key] != _one(values, key, space_key):
                raise SpecError(
                    f"[model] config has {key} = {config[key]!r} but [space] {space_key} = {values[0]}; give one "
                    "value (or leave it out of config)."
                )
    if "intermediate_size" in config:
        d, ratio = (
            _one(space.d_model, "intermediate_size", "d_model"),
            _one(space.mlp_ratio, "intermediate_size", "mlp_ratio"),
        )
        if config["intermediate_size"] != max(1, round(ratio * d)):
            raise SpecError(
                f"[model] config has intermediate_size = {config['intermediate_size']!r} but [space] mlp_ratio "
                f"{ratio:g} x d_model {d} is {max(1, round(ratio * d))}; leave mlp_ratio out to take the config's."
            )


def check_hf(
    model: ModelSpec, space: SpaceSpec, task: TaskSpec, latency: LatencyConfig | None = None
) -> None:
    """Refuse, in one line naming the limit and the fix, what ``model``'s class cannot realise of ``space`` on
    ``task``, or time at ``latency``'s shape (see the module docstring). Nothing for explorer's own model or a
    user's function."""
    if model.hf is None:
        return
    family = family_of(model)
    config = _config(model, family)
    cls = family.config_class
    where = f'[model] hf = "{family.model_type}"'
    for key in HEAD_KEYS:
        if key in config:
            raise SpecError(
                f"{where}: config sets {key}, which is what the study searches; remove it and list the candidates "
                f"in [space] {'heads' if key == 'num_attention_heads' else 'kv_heads'}."
            )
    for key in TASK_KEYS:
        if key in config:
            raise SpecError(
                f"{where}: config sets {key}, which explorer takes from the task; remove it from [model] config."
            )
    _check_sizes(config, space)
    other = [f for f in space.families if f != "uniform"]
    if other and not family.per_layer:
        raise SpecError(
            f"{where}: {cls} holds one num_attention_heads for every layer, so it cannot take the per-layer "
            f'families {", ".join(other)}; set [space] families = ["uniform"].'
        )
    if space.kv_heads is not None and not family.kv_heads:
        raise SpecError(
            f"{where}: {cls} has no num_key_value_heads; remove [space] kv_heads (llama, mistral and qwen2 search key/value heads)."
        )
    if space.kv_per_layer and not family.per_layer:
        raise SpecError(
            f"{where}: {cls} holds one num_key_value_heads for every layer; set [space] kv_per_layer = false."
        )
    if space.head_dim is not None and not family.head_dim:
        raise SpecError(
            f"{where}: {cls}'s heads are hidden_size / num_attention_heads wide; remove [space] head_dim."
        )
    if space.dropout:
        raise SpecError(
            f"{where}: [space] dropout does not reach a transformers model; set {' / '.join(family.dropout_keys)} "
            "in [model] config instead."
        )
    if space.attention == "serial":
        raise SpecError(
            f'{where}: transformers runs its heads as one product ("fused": sdpa, "merged": eager), never a loop '
            'over heads; set [space] attention = "fused" or "merged".'
        )
    if latency is not None and latency.seq_len is not None and family.inputs == "images":
        raise SpecError(
            f"{where}: a ViT reads whole images, its positions the image's patches; remove [latency] seq_len."
        )
    if task.kind == "language_model" and not family.decoder:
        raise SpecError(
            f'{where}: {cls} has no causal language model for task {task.name!r}; use hf = "llama", "mistral", "qwen2" or "gpt2".'
        )
