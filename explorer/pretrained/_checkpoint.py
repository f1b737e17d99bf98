"""A shrunk model as a checkpoint ``from_pretrained`` loads in any process, explorer installed or not.

:func:`save_shrunk` writes the model's own ``save_pretrained`` output (``config.json``, ``model.safetensors``),
then in ``config.json``:

* ``num_query_heads`` and ``num_kv_heads``: the heads of each layer, one entry per layer, as OpenELM's config
  lists them, read off the model's projections; the stock uniform fields (``num_attention_heads``, Llama's
  ``num_key_value_heads`` and ``head_dim``) keep the original model's values, which set the head width;
* ``model_type`` (``shrunk_llama`` or ``shrunk_bert``), ``architectures`` and an ``auto_map`` naming the classes
  of ``modeling_shrunk.py``, a self-contained file (torch and transformers only) copied beside the weights,
  whose config and model classes subclass the stock ones and resize each layer's attention from those lists.

So ``transformers.AutoModelForCausalLM.from_pretrained(folder, trust_remote_code=True)`` (``AutoModel``, and
``AutoModelForSequenceClassification`` for BERT) rebuilds the shrunk model. The distinct ``model_type`` makes
a load without ``trust_remote_code`` fail with transformers' own request for it, rather than build the stock
model and miss the weights. Before anything is put in place the folder is loaded back with those classes (in
this process, from explorer's copy of the file) and run on a fixed batch of tokens, with the model's own unsaved
buffers (rotary frequencies, which a model cast to half precision holds in it): a missing, unexpected or
mismatched weight, or an output further than ``tolerance`` from the model's, is an
:class:`~explorer.errors.ExportMismatchError` and nothing is written. The check holds a second copy of the model
in memory while it runs; ``check=False`` skips it.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from pathlib import Path
from typing import Any

import torch
from torch import nn

from explorer.errors import ConfigError, ExportMismatchError
from explorer.model import quiet_transformers
from explorer.pretrained._layout import HeadLayout, head_layout

MODELING_FILE = "modeling_shrunk.py"  # the name the checkpoint's auto_map refers to
_SOURCE = Path(__file__).with_name("_modeling_shrunk.py")  # its text, kept in explorer as a module
# the stock class a model is (or subclasses) -> the class of modeling_shrunk.py that rebuilds it
_SHRUNK_CLASS = {
    "LlamaForCausalLM": "ShrunkLlamaForCausalLM",
    "LlamaModel": "ShrunkLlamaModel",
    "BertForSequenceClassification": "ShrunkBertForSequenceClassification",
    "BertModel": "ShrunkBertModel",
}
# each family's auto classes -> the class of modeling_shrunk.py each loads
_AUTO_MAP = {
    "llama": {
        "AutoConfig": "ShrunkLlamaConfig",
        "AutoModel": "ShrunkLlamaModel",
        "AutoModelForCausalLM": "ShrunkLlamaForCausalLM",
    },
    "bert": {
        "AutoConfig": "ShrunkBertConfig",
        "AutoModel": "ShrunkBertModel",
        "AutoModelForSequenceClassification": "ShrunkBertForSequenceClassification",
    },
}
CHECK_BATCH = (2, 8)  # the sequences and tokens of the batch the saved model is checked on


def _shrunk_class(model: nn.Module) -> str:
    """The class of modeling_shrunk.py that rebuilds ``model`` (a one-line ConfigError where there is none)."""
    for cls in type(model).__mro__:
        if cls.__name__ in _SHRUNK_CLASS:
            return _SHRUNK_CLASS[cls.__name__]
    name = type(model).__name__
    raise ConfigError(
        f"{name} cannot be saved as a shrunk checkpoint: {MODELING_FILE} rebuilds {', '.join(_SHRUNK_CLASS)}; "
        "save its base model (model.base_model) instead."
    )


def _config_doc(path: Path, layout: HeadLayout, shrunk_class: str) -> dict[str, Any]:
    """``config.json`` as ``save_pretrained`` wrote it, with the per-layer heads and the classes that read them."""
    doc = json.loads(path.read_text())
    module = MODELING_FILE.removesuffix(".py")
    doc |= {
        "model_type": f"shrunk_{layout.family}",
        "architectures": [shrunk_class],
        "auto_map": {auto: f"{module}.{cls}" for auto, cls in _AUTO_MAP[layout.family].items()},
        "num_query_heads": list(layout.heads),
        "num_kv_heads": list(layout.kv_heads),
    }
    return doc


def _outputs(model: Any, input_ids: torch.Tensor) -> torch.Tensor:
    """The model's logits (a head's) or last hidden state (a base model's) on ``input_ids``."""
    with torch.inference_mode():
        out = model(input_ids=input_ids)
    return out.logits if getattr(out, "logits", None) is not None else out.last_hidden_state


def _same_unsaved_buffers(loaded: Any, model: nn.Module) -> None:
    """Give ``loaded`` the model's buffers that are not saved (Llama's rotary frequencies): ``from_pretrained``
    rebuilds them in float32 where a model cast with ``.to(dtype)`` holds them in its dtype, a difference of the
    cast, not of the checkpoint."""
    saved = set(loaded.state_dict())
    for name, buffer in model.named_buffers():
        if name in saved:
            continue
        owner, _, leaf = name.rpartition(".")
        module = loaded.get_submodule(owner)
        if leaf in module._buffers:
            module.register_buffer(leaf, buffer.clone(), persistent=False)


def _check_saved(model: Any, folder: Path, shrunk_class: str, tolerance: float) -> None:
    """Load ``folder`` back with explorer's copy of its classes; the same weights and outputs, or a mismatch."""
    from explorer.pretrained import _modeling_shrunk  # imports transformers

    loader = getattr(_modeling_shrunk, shrunk_class)
    device = next(model.parameters()).device
    with quiet_transformers():
        loaded, info = loader.from_pretrained(  # mismatched sizes reported in info, not raised
            folder,
            output_loading_info=True,
            ignore_mismatched_sizes=True,
            attn_implementation=model.config._attn_implementation,
        )
    wrong = {kind: sorted(info[kind]) for kind in ("missing_keys", "unexpected_keys", "mismatched_keys")}
    if any(wrong.values()):
        said = "; ".join(
            f"{kind.replace('_', ' ')}: {', '.join(map(str, keys))}" for kind, keys in wrong.items() if keys
        )
        raise ExportMismatchError(
            f"{shrunk_class}.from_pretrained reads the folder back with {said}; nothing was written."
        )
    loaded = loaded.to(device).eval()
    _same_unsaved_buffers(loaded, model)
    generator = torch.Generator().manual_seed(0)
    input_ids = torch.randint(model.config.vocab_size, CHECK_BATCH, generator=generator).to(device)
    training = model.training
    try:
        reference = _outputs(model.eval(), input_ids).float()
    finally:
        model.train(training)
    diff = float((_outputs(loaded, input_ids).float() - reference).abs().max())
    if not diff <= tolerance:
        raise ExportMismatchError(
            f"{shrunk_class}.from_pretrained reads back a model whose outputs differ from the shrunk model's by "
            f"up to {diff:.3g} (tolerance {tolerance:g}); nothing was written."
        )


def save_shrunk(
    model: nn.Module, out_dir: str | Path, *, check: bool = True, tolerance: float = 1e-5
) -> Path:
    """Write ``model`` (shrunk by :func:`~explorer.pretrained.shrink`, or as it is) into the new or empty folder
    ``out_dir`` as a checkpoint ``from_pretrained(out_dir, trust_remote_code=True)`` loads (see the module
    docstring); checked first unless ``check`` is False. Returns the folder."""
    layout = head_layout(model)
    shrunk_class = _shrunk_class(model)
    out = Path(out_dir)
    if out.exists() and (not out.is_dir() or any(out.iterdir())):
        raise ConfigError(
            f"{out} is {'a file' if not out.is_dir() else 'a folder with files in it'}; save a shrunk checkpoint "
            "into a new or empty folder."
        )
    out.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=out.parent, prefix=".explorer-shrunk-") as tmp:
        staged = Path(tmp)
        with quiet_transformers():
            model.save_pretrained(staged)  # type: ignore[operator]  # a transformers PreTrainedModel
        config = staged / "config.json"
        config.write_text(
            json.dumps(_config_doc(config, layout, shrunk_class), indent=2, sort_keys=True) + "\n"
        )
        shutil.copyfile(_SOURCE, staged / MODELING_FILE)
        if check:
            _check_saved(model, staged, shrunk_class, tolerance)
        out.mkdir(exist_ok=True)
        for f in sorted(staged.iterdir()):
            os.replace(f, out / f.name)
    return out
