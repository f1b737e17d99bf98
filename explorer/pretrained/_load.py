"""A trained transformers checkpoint as explorer meets it: read, checked and sized before its weights are loaded.

:func:`inspect_checkpoint` reads a local folder that ``save_pretrained`` wrote (no download, no remote code): its
``config.json`` (the architecture and its heads) and its safetensors weight files' headers (the parameter count
and bytes, without reading a tensor). Everything a user can get wrong is refused there, in one line that names
the problem and the fix, before anything is loaded:

* a path that is not a folder, or a folder without ``config.json`` (not a transformers checkpoint);
* an architecture whose attention explorer cannot regroup, or a class of a family it can whose checkpoint it
  does not cut (both named: ``LlamaForCausalLM``, ``LlamaModel``, ``BertForSequenceClassification`` and
  ``BertModel`` are the ones it can);
* weights only in pickle files (``pytorch_model.bin``): explorer never unpickles a user's file, and a checkpoint
  re-saved with safetensors loads the same;
* a checkpoint too large for this machine: loading it and recovering a pruned candidate from it (the original
  as the teacher, the candidate with its gradients and Adam's two moments) is estimated from the parameter
  count and refused with both sizes (:func:`explorer.limits.check_memory`).

:func:`load_checkpoint` then loads it with the class that saved it, from safetensors only, in eval mode.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from explorer.errors import ConfigError
from explorer.limits import D_MODEL, HEAD_DIM, HEADS, LAYERS, check_file_size, check_memory
from explorer.model import quiet_transformers, require_transformers

# model_type in config.json -> whether it is a causal LM, and the classes (config.json's architectures) loaded:
# those head surgery cuts and saves
FAMILIES: dict[str, tuple[bool, tuple[str, ...]]] = {
    "llama": (True, ("LlamaForCausalLM", "LlamaModel")),
    "bert": (False, ("BertForSequenceClassification", "BertModel")),
}
# float32 copies of the weights a study's recovery holds at its peak: the original (teacher), the candidate, its
# gradients and Adam's two moments, and room for the activations and the runtime (a study recovering a
# 136-million-parameter Llama on the text task held about 6.5 copies' worth in its one process, measured by RSS)
RECOVERY_COPIES = 7
_FLOAT32 = 4


@dataclass(frozen=True)
class Checkpoint:
    """What a checkpoint folder holds, read from its config and its weight files' headers."""

    path: Path
    model_type: str  # config.json's model_type: "llama", "bert"
    architecture: str  # the class that saved it (config.json's architectures[0]), e.g. "LlamaForCausalLM"
    causal: bool  # a causal language model (decode latency and key/value cache apply)
    layers: int
    heads: int  # query heads in every layer
    kv_heads: int  # key/value heads in every layer (= heads where the family has no grouped heads)
    head_dim: int
    hidden: int
    parameters: int  # stored parameters (tensors in the weight files)
    weight_bytes: int  # bytes of those tensors as stored


def inspect_checkpoint(path: str | Path) -> Checkpoint:
    """Read and check the checkpoint folder at ``path`` without loading its weights; a one-line
    :class:`~explorer.errors.ConfigError` (or :class:`~explorer.errors.LimitError` for a size) when it cannot be
    used."""
    folder = Path(path).expanduser()
    fix = "give the folder that save_pretrained wrote (config.json and model.safetensors)"
    if not folder.exists():
        raise ConfigError(f"no checkpoint at {str(folder)!r}; {fix}.")
    if not folder.is_dir():
        raise ConfigError(f"{str(folder)!r} is a file, not a transformers checkpoint folder; {fix}.")
    config_file = folder / "config.json"
    if not config_file.is_file():
        raise ConfigError(
            f"{str(folder)!r} holds no config.json, so it is not a transformers checkpoint; {fix}."
        )
    check_file_size(config_file, "a checkpoint's config.json")
    try:
        config = json.loads(config_file.read_text(encoding="utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ConfigError(
            f"{str(config_file)!r} is not valid JSON ({exc}); re-save the checkpoint."
        ) from None
    if not isinstance(config, dict):
        raise ConfigError(f"{str(config_file)!r} is not a JSON object; re-save the checkpoint.")
    model_type = config.get("model_type")
    architecture = _architecture(config)
    if model_type not in FAMILIES:
        raise ConfigError(
            f"{architecture} (model_type {model_type!r}) is an architecture whose attention heads explorer cannot "
            f"regroup; it can regroup {', '.join(sorted(FAMILIES))} checkpoints."
        )
    causal, classes = FAMILIES[model_type]
    if architecture not in classes:
        raise ConfigError(
            f"{str(folder)!r} holds a {architecture}, a class whose heads explorer does not cut; it cuts "
            f"{', '.join(c for _, names in FAMILIES.values() for c in names)} checkpoints."
        )
    layers = _count(config, "num_hidden_layers", LAYERS, config_file)
    heads = _count(config, "num_attention_heads", HEADS, config_file)
    grouped = causal and config.get("num_key_value_heads") is not None  # absent: one key/value head a head
    kv_heads = _count(config, "num_key_value_heads", HEADS, config_file) if grouped else heads
    hidden = _count(config, "hidden_size", D_MODEL, config_file)
    head_dim = (
        _count(config, "head_dim", HEAD_DIM, config_file) if config.get("head_dim") else hidden // heads
    )
    if heads % kv_heads:
        raise ConfigError(
            f"{str(config_file)!r} has {heads} query heads and {kv_heads} key/value heads, which do not divide "
            "them; re-save the checkpoint."
        )
    parameters, weight_bytes = _weights(folder)
    check_memory(
        parameters * _FLOAT32 * RECOVERY_COPIES,
        f"shrinking the {parameters:,}-parameter checkpoint at {str(folder)!r} (it and a recovering candidate "
        "in float32, with gradients, Adam's moments and activations)",
        "choose a smaller checkpoint",
    )
    return Checkpoint(
        folder,
        model_type,
        architecture,
        causal,
        layers,
        heads,
        kv_heads,
        int(head_dim),
        hidden,
        parameters,
        weight_bytes,
    )


def load_checkpoint(checkpoint: Checkpoint) -> Any:
    """The checkpoint's model, loaded by the class that saved it from safetensors alone (no remote code, no
    download), in eval mode."""
    transformers = require_transformers("loading a transformers checkpoint")
    model_class = getattr(transformers, checkpoint.architecture)
    with quiet_transformers():
        model = model_class.from_pretrained(
            checkpoint.path, local_files_only=True, trust_remote_code=False, use_safetensors=True
        )
    return model.eval()


def _architecture(config: dict[str, Any]) -> str:
    names = config.get("architectures")
    if isinstance(names, list) and names and isinstance(names[0], str):
        return names[0]
    return f"a {config.get('model_type', 'model')!s} checkpoint"


def _count(config: dict[str, Any], key: str, limit: Any, where: Path) -> int:
    value = config.get(key)
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ConfigError(
            f"{str(where)!r} has no positive integer {key} (got {value!r}); re-save the checkpoint."
        )
    return value if limit is None else limit.check(value, f"{key} in {where.name}")


def _weights(folder: Path) -> tuple[int, int]:
    """(parameters, bytes) of the tensors in the folder's safetensors files, read from their headers alone."""
    files = sorted(folder.glob("*.safetensors"))
    if not files:
        pickled = sorted(p.name for p in folder.glob("*.bin"))
        if pickled:
            raise ConfigError(
                f"{str(folder)!r} holds its weights only in pickle files ({', '.join(pickled)}), which explorer "
                "does not load; re-save it with save_pretrained(..., safe_serialization=True)."
            )
        raise ConfigError(
            f"{str(folder)!r} holds no weights (no *.safetensors file); re-save the checkpoint."
        )
    require_transformers("reading a transformers checkpoint")  # safetensors comes with it
    from safetensors import SafetensorError, safe_open

    parameters = weight_bytes = 0
    for file in files:
        try:
            with safe_open(str(file), framework="pt") as f:
                for name in f.keys():  # noqa: SIM118 - a safetensors file is not iterable
                    piece = f.get_slice(name)
                    count = math.prod(piece.get_shape())
                    parameters += count
                    weight_bytes += count * _itemsize(piece.get_dtype())
        except (SafetensorError, OSError) as exc:
            raise ConfigError(
                f"{str(file)!r} is not a readable safetensors file ({exc}); re-save it."
            ) from None
    return parameters, weight_bytes


_ITEMSIZE = {"F64": 8, "I64": 8, "U64": 8, "F32": 4, "I32": 4, "U32": 4, "F16": 2, "BF16": 2, "I16": 2}


def _itemsize(dtype: str) -> int:
    return _ITEMSIZE.get(dtype, 1)
