"""`explorer export NAME --format hf --out DIR`: the answer as a Hugging Face model, or its ``config.json``.

A study of a transformers model (``[model] hf``) exports the trained answer whole (:func:`write_hf_model`):
``config.json`` and ``model.safetensors``, written by the class's own ``save_pretrained``, loaded back with
its ``AutoModelFor...`` class and run on the task's test split before anything is put in place; the logits must
match explorer's within the export's tolerance (as an ONNX export's must), or nothing is written.

For explorer's own encoder the export is a configuration only. The file is what ``transformers.AutoConfig.from_pretrained(DIR)`` loads, in the stock family nearest the task:

* ``vit`` for image encoders (``image_size``, ``patch_size``, ``num_channels`` from the task's patches);
* ``bert`` for token encoders (and for feature inputs, which go in as ``inputs_embeds``);
* ``llama`` for language models (``num_key_value_heads`` and ``head_dim`` included).

Every one carries ``num_attention_heads``, ``hidden_size``, ``num_hidden_layers`` and ``intermediate_size``
(Llama also ``num_key_value_heads`` and ``head_dim``). A stock config holds one head count for every layer; where
the answer's layers differ (or ask for what the family has no field for: key/value heads in ViT or BERT, a head
width other than ``hidden_size / heads``), the file says so: beside the nearest uniform config it carries the
per-layer lists as OpenELM's configuration does (``num_query_heads``, ``num_kv_heads``, and ``head_dims``), and
the ``explorer`` entry names each layer value the stock fields cannot express, which the command also prints.
The nearest uniform head count is the layer value with the least total log-distance to every layer's (ties: the
larger). It is a configuration of the layout, not of the weights: explorer's blocks are not converted.

Before the file is kept it is loaded back with ``AutoConfig`` (the ``hf`` extra) and its head fields compared.
"""

from __future__ import annotations

import json
import math
import os
import tempfile
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import torch

from explorer.data import Task
from explorer.errors import ConfigError, ExportMismatchError
from explorer.layout import InputSpec, ModelConfig
from explorer.model import HFModel, hf_inputs, logit_parity, quiet_transformers, require_transformers
from explorer.output._result_folders import as_user_made
from explorer.spec import StudySpec
from explorer.storage import TrialRecord


def nearest_uniform(values: Sequence[int], ok: Callable[[int], bool] = lambda v: True) -> int:
    """The value of ``values`` (one allowed by ``ok``) with the least total |log2| distance to all of them."""
    candidates = sorted({v for v in values if ok(v)}) or sorted(set(values))
    return min(candidates, key=lambda h: (sum(abs(math.log2(v / h)) for v in values), -h))


def _family(spec: InputSpec) -> str:
    if spec.causal:
        return "llama"
    return "vit" if spec.image else "bert"


def _uniform(cfg: ModelConfig, family: str) -> tuple[int, int, int]:
    """The nearest uniform (heads, kv heads, head width) the family's stock config can hold."""
    d = cfg.d_model
    heads = nearest_uniform(cfg.heads, (lambda h: True) if family == "llama" else (lambda h: d % h == 0))
    kv = nearest_uniform(cfg.kv_per_layer, lambda k: heads % k == 0) if family == "llama" else heads
    widths = [dk for h, dk in zip(cfg.heads, cfg.d_k, strict=True) if h == heads]
    head_dim = widths[0] if family == "llama" else d // heads
    return heads, kv, head_dim


def _lost(cfg: ModelConfig, uniform: tuple[int, int, int], family: str) -> list[str]:
    """Each layer value the uniform stand-in does not hold, in words (ViT and BERT have no key/value heads: a
    layer's count is lost only where it differs from its query heads)."""
    heads, kv, head_dim = uniform
    out = []
    for i, (h, k, dk) in enumerate(zip(cfg.heads, cfg.kv_per_layer, cfg.d_k, strict=True)):
        stock_kv = kv if family == "llama" else h
        pairs = ((h, heads, f"{h} heads"), (k, stock_kv, f"{k} key/value heads"), (dk, head_dim, f"d_k {dk}"))
        parts = [text for value, stock, text in pairs if value != stock]
        if parts:
            out.append(f"layer {i}: {', '.join(parts)}")
    return out


def hf_config(
    record: TrialRecord, spec: StudySpec, input_spec: InputSpec
) -> tuple[dict[str, Any], list[str]]:
    """The ``config.json`` content for ``record``'s layout, and the layer values its stock fields cannot hold."""
    cfg = record.config
    assert cfg is not None
    family = _family(input_spec)
    heads, kv, head_dim = uniform = _uniform(cfg, family)
    hidden = max(1, round(cfg.mlp_ratio * cfg.d_model))
    doc: dict[str, Any] = {
        "model_type": family,
        "hidden_size": cfg.d_model,
        "num_hidden_layers": cfg.n_layers,
        "num_attention_heads": heads,
        "intermediate_size": hidden,
        "hidden_act": "gelu",
        "layer_norm_eps": 1e-5,
    }
    if family == "vit":
        h, w, c = input_spec.image
        doc |= {
            "image_size": h if h == w else [h, w],
            "patch_size": input_spec.patch,
            "num_channels": c,
            "qkv_bias": True,
            "hidden_dropout_prob": cfg.dropout,
            "attention_probs_dropout_prob": cfg.dropout,
        }
    elif family == "bert":
        doc |= {
            "vocab_size": max(1, input_spec.vocab_size),
            "max_position_embeddings": input_spec.seq_len,
            "type_vocab_size": 1,
            "hidden_dropout_prob": cfg.dropout,
            "attention_probs_dropout_prob": cfg.dropout,
        }
    else:
        doc |= {
            "vocab_size": input_spec.vocab_size,
            "max_position_embeddings": input_spec.seq_len,
            "num_key_value_heads": kv,
            "head_dim": head_dim,
            "attention_bias": True,
            "attention_dropout": cfg.dropout,
            "rms_norm_eps": 1e-5,
            "tie_word_embeddings": False,
        }
    if not input_spec.causal:
        doc["num_labels"] = input_spec.n_classes
    lost = _lost(cfg, uniform, family)
    if lost:  # per-layer values: OpenELM's fields beside the uniform stand-in
        doc |= {
            "num_query_heads": list(cfg.heads),
            "num_kv_heads": list(cfg.kv_per_layer),
            "head_dims": list(cfg.d_k),
        }
    stand_in = f"num_attention_heads = {heads}" + (
        f", num_key_value_heads = {kv}" if family == "llama" else ""
    )
    doc["explorer"] = {
        "study": spec.name,
        "trial": record.number,
        "heads": list(cfg.heads),
        "kv_heads": list(cfg.kv_per_layer),
        "d_k": list(cfg.d_k),
        "per_layer": bool(lost),
        "stock_config_cannot_express": lost,
        "note": (
            f"the answer's layers differ; {stand_in} is the nearest uniform layout, the per-layer values are in "
            "num_query_heads, num_kv_heads and head_dims (as OpenELM's config holds them)"
            if lost
            else "the stock fields hold the answer's layout exactly"
        )
        + "; a configuration of the head layout, not a conversion of explorer's weights",
        "model": spec.model.build or "explorer's own",
    }
    return doc, lost


def _writable_ancestor(out: Path) -> Path:
    """The nearest existing folder at or above ``out``, which must be writable (a one-line ConfigError)."""
    if out.exists() and not out.is_dir():
        raise ConfigError(
            f"--out {out} is a file; --format hf writes config.json into a folder: give a folder."
        )
    existing = out
    while not existing.exists() and existing != existing.parent:
        existing = existing.parent
    if not existing.is_dir() or not os.access(existing, os.W_OK | os.X_OK):
        raise ConfigError(
            f"cannot write into --out {out} ({existing} is not a writable folder); choose another."
        )
    return existing


def _check_dir(out: Path) -> Path:
    _writable_ancestor(out)
    return out


def write_hf_config(doc: dict[str, Any], out: str | Path) -> Path:
    """Write ``doc`` as ``out/config.json`` (atomically), after loading it back with ``AutoConfig`` and
    comparing its head fields; return the file's path."""
    transformers = require_transformers("exporting a Hugging Face config")
    out = _check_dir(Path(out))
    with tempfile.TemporaryDirectory(prefix="explorer-hf-") as tmp:
        (Path(tmp) / "config.json").write_text(json.dumps(doc, indent=2) + "\n")
        loaded = transformers.AutoConfig.from_pretrained(tmp)
    for key in (
        "model_type",
        "num_attention_heads",
        "hidden_size",
        "num_hidden_layers",
        "num_key_value_heads",
    ):
        if key in doc and getattr(loaded, key, None) != doc[key]:
            raise ExportMismatchError(
                f"transformers reads {key} = {getattr(loaded, key, None)!r} from the config, not {doc[key]!r}; "
                "nothing was written."
            )
    out.mkdir(parents=True, exist_ok=True)
    path = out / "config.json"
    fd, tmp_name = tempfile.mkstemp(dir=out, prefix=".config.json.", suffix=".tmp")
    with os.fdopen(fd, "w") as f:
        f.write(json.dumps(doc, indent=2) + "\n")
    as_user_made(tmp_name)
    os.replace(tmp_name, path)
    return path


def write_hf_model(
    model: HFModel, task: Task, out: str | Path, meta: dict[str, Any], tolerance: float, shrunk: bool = False
) -> tuple[Path, float, float, str]:
    """Save the trained transformers model inside ``model`` into the folder ``out`` (``save_pretrained``:
    config.json with ``meta`` as its ``explorer`` entry, model.safetensors), after loading it back with its
    ``AutoModelFor...`` class and comparing its logits on the test split with ``model``'s: a difference above
    ``tolerance`` is an :class:`ExportMismatchError` and nothing is written. Returns the folder, the largest
    difference, the share of test examples with the same prediction and the class that loads it. ``shrunk``: a
    trained checkpoint's cut (``[model] pretrained``), written by :func:`explorer.pretrained.save_shrunk` (per-layer
    ``num_query_heads`` and ``num_kv_heads``, and the modeling file ``trust_remote_code=True`` runs)."""
    transformers = require_transformers("exporting a Hugging Face model")
    out = Path(out)
    staging_parent = _writable_ancestor(out)
    family, spec = model.family, model.spec
    X = task.test[0]
    model.eval()
    with torch.inference_mode():
        reference = model(X).float()
    model.hf.config.explorer = meta
    loader = family.auto_class(spec.causal)
    with tempfile.TemporaryDirectory(dir=staging_parent, prefix=".explorer-hf-") as tmp:
        staged = Path(tmp)
        with quiet_transformers():
            if shrunk:
                from explorer.pretrained import save_shrunk

                staged = save_shrunk(model.hf, staged / "model", tolerance=tolerance)
            else:
                model.hf.save_pretrained(staged)
            loaded = getattr(transformers, loader).from_pretrained(staged, trust_remote_code=shrunk).eval()
        extra = {"use_cache": False} if family.decoder else {}
        with torch.inference_mode():
            logits = loaded(**hf_inputs(X, spec, family), **extra).logits.float()
        diff, agreement = logit_parity(logits, reference)
        if not diff <= tolerance:
            raise ExportMismatchError(
                f"{loader}.from_pretrained reads back a model whose logits differ from explorer's by up to "
                f"{diff:.3g} on the test split (tolerance {tolerance:g}); nothing was written."
            )
        out.mkdir(parents=True, exist_ok=True)
        for f in sorted(staged.iterdir()):
            as_user_made(f)  # safetensors writes its file private; the folder is meant to be shared
            os.replace(f, out / f.name)
    return out, diff, agreement, loader
