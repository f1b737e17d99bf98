"""A transformers architecture as the model (``[model] hf = "bert"`` with ``config = {...}``), built from its config
class alone: no weights, nothing downloaded.

:class:`HFBuilder` plays the part of a user's model function (:class:`~explorer.model._usermodel.ModelBuilder`),
so training, latency on every runtime, finalists, retraining and the report treat it as they treat any model.
For each layout it builds the family's class (:mod:`explorer.layout._hf_families`) from the config class with
``hidden_size``, ``num_hidden_layers``, ``intermediate_size``, ``num_attention_heads`` (and
``num_key_value_heads``, ``head_dim`` where the class has them) from the layout, the task's sizes, and the user's
config for the rest; the attention runs as transformers' ``sdpa`` (``[space] attention = "fused"``) or ``eager``
("merged"). The class is the one a transformers user would pick for the task: sequence classification for
token tasks, image classification for images (through the ViT's own patch embedding: explorer's patch tokens
are put back into ``pixel_values``), the causal LM for a language model.

Token classifiers get one extra token id, the pad (``pad_token_id = vocab``), which the task never uses: the
decoder classes pool the last token that is not padding, and an embedding's padding row never learns, so no
real token may be the pad. :class:`HFModel` wraps the class so that ``forward(x)`` maps explorer's batch to
logits, and declares its heads (``explorer_heads``) from the config it was built with.

Decoding (:meth:`HFBuilder.decoder`): the causal LM's own key/value cache, filled by a prefill of ``context``
tokens, then one new token per sequence per step, the cache cut back to ``context`` before each step.
"""

from __future__ import annotations

import contextlib
import dataclasses
import difflib
import functools
import hashlib
import inspect
import json
from collections.abc import Callable, Iterator
from typing import Any

import torch
from torch import nn

from explorer.errors import ConfigError, MissingExtraError
from explorer.layout import HF_FAMILIES, HF_TYPES, HFFamily, InputSpec, ModelConfig, canonical_key
from explorer.model._usermodel import ModelBuilder

_ATTENTION = {
    "fused": "sdpa",
    "merged": "eager",
}  # explorer's attention names -> transformers' implementations


def require_transformers(what: str) -> Any:
    """The transformers package, or a one-line :class:`MissingExtraError` naming the ``hf`` extra."""
    try:
        import transformers
    except ImportError:
        raise MissingExtraError(what, "hf", "transformers") from None
    return transformers


@contextlib.contextmanager
def quiet_transformers() -> Iterator[None]:
    """transformers logs advice about configs and draws progress bars on stderr; a library must not print, so
    both are kept to errors here and restored after."""
    from transformers.utils import logging as hf_logging

    previous, bars = hf_logging.get_verbosity(), hf_logging.is_progress_bar_enabled()
    hf_logging.set_verbosity_error()
    hf_logging.disable_progress_bar()  # save_pretrained and from_pretrained draw tqdm bars on stderr
    try:
        yield
    finally:
        hf_logging.set_verbosity(previous)
        if bars:
            hf_logging.enable_progress_bar()


def pixel_values(x: torch.Tensor, spec: InputSpec) -> torch.Tensor:
    """Patch tokens ``[B, T, P*P*C]`` (explorer's cut: patches row-major, pixels row-major, channels last) back
    into images ``[B, C, H, W]``, what a ViT's patch embedding reads."""
    B = x.shape[0]
    (gh, gw), p, c = spec.grid or (0, 0), spec.patch, spec.image[2]
    x = x.reshape(B, gh, gw, p, p, c)  # [B, grid_row, grid_col, row_in_patch, col_in_patch, C]
    return x.permute(0, 5, 1, 3, 2, 4).reshape(B, c, gh * p, gw * p)  # [B, C, H, W]


def hf_inputs(x: torch.Tensor, spec: InputSpec, family: HFFamily) -> dict[str, torch.Tensor]:
    """explorer's batch ``x`` as the keyword the class takes: ``pixel_values`` for images, else ``input_ids``."""
    return {"pixel_values": pixel_values(x, spec)} if family.inputs == "images" else {"input_ids": x}


class HFModel(nn.Module):
    """A transformers model whose ``forward(x)`` takes explorer's batch and returns the logits tensor.

    Args:
        model: the transformers model (``self.hf``; what an export saves).
        family: its :class:`HFFamily`.
        spec: the task's input spec (the image grid for a ViT).
        heads, kv_heads: the heads per layer of the config it was built with (what explorer checks).
    """

    def __init__(
        self, model: nn.Module, family: HFFamily, spec: InputSpec, heads: list[int], kv_heads: list[int]
    ):
        super().__init__()
        self.hf: Any = model  # a transformers PreTrainedModel (transformers is an optional extra, typed Any)
        self.family = family
        self.spec = spec
        self.explorer_heads = heads
        self.explorer_kv_heads = kv_heads
        self._extra = {"use_cache": False} if family.decoder else {}  # no cache while training or timing

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.hf(**hf_inputs(x, self.spec, self.family), **self._extra).logits


@dataclasses.dataclass(frozen=True)
class HFBuilder(ModelBuilder):
    """Builds each layout as the transformers class of ``ref`` (``hf:TYPE``) from its config (``config_json``)."""

    config_json: str = "{}"  # the user's config (all but the heads), as canonical JSON

    @classmethod
    def of(cls, model_type: str, config: dict[str, Any]) -> HFBuilder:
        """The builder for ``[model] hf = model_type`` with ``config``; transformers must be installed."""
        if model_type not in HF_FAMILIES:
            raise ConfigError(f"[model] hf = {model_type!r} is not one of {', '.join(HF_TYPES)}.")
        require_transformers(f'[model] hf = "{model_type}"')
        return cls(f"hf:{model_type}", json.dumps(config, sort_keys=True))

    @property
    def family(self) -> HFFamily:
        return HF_FAMILIES[self.ref.removeprefix("hf:")]

    @functools.cached_property
    def config(self) -> dict[str, Any]:
        """The user's config with canonical key names."""
        return {canonical_key(self.family, k): v for k, v in json.loads(self.config_json).items()}

    @functools.cached_property
    def function(self) -> Any:
        return self.build

    @functools.cached_property
    def fingerprint(self) -> str:
        """sha256 of what the models depend on: the type, the config and the transformers release."""
        transformers = require_transformers(f"[model] hf = {self.ref[3:]!r}")
        text = f"{self.ref}|{self.config_json}|transformers{transformers.__version__}"
        return hashlib.sha256(text.encode()).hexdigest()

    @property
    def decodes(self) -> bool:
        """Whether this builder can time decoding (a causal LM with a key/value cache)."""
        return self.family.decoder

    def class_name(self, spec: InputSpec) -> str:
        """The transformers class built for ``spec``'s task."""
        return self.family.model_class(spec.causal)

    def _check_input(self, spec: InputSpec) -> None:
        family, cls = self.family, self.class_name(spec)
        if family.inputs == "images" and not spec.image:
            raise ConfigError(
                f"[model] hf = {family.model_type!r} ({cls}) reads images, and this task feeds "
                f"{spec.kind}; give image data with the task option patch = P, or a token class such as bert or llama."
            )
        grid = spec.grid
        if family.inputs == "images" and grid is not None and spec.seq_len != grid[0] * grid[1]:
            raise ConfigError(
                f"[model] hf = {family.model_type!r} ({cls}) reads whole {spec.image[0]} x {spec.image[1]} images "
                f"({grid[0] * grid[1]} patches), not {spec.seq_len} positions; remove [latency] seq_len."
            )
        if family.inputs == "tokens" and spec.kind != "tokens":
            raise ConfigError(
                f"[model] hf = {family.model_type!r} ({cls}) reads token ids, and this task feeds "
                f'{spec.n_features} features per position; use hf = "vit" for images cut into patches.'
            )

    def hf_config(self, cfg: ModelConfig, spec: InputSpec) -> Any:
        """The transformers config of layout ``cfg`` on ``spec``'s task (see the module docstring)."""
        self._check_input(spec)
        transformers = require_transformers(f"[model] hf = {self.ref[3:]!r}")
        family = self.family
        if len(set(cfg.heads)) != 1 or len(set(cfg.kv_per_layer)) != 1 or len(set(cfg.d_k)) != 1:
            raise ConfigError(
                f"{family.config_class} holds one head layout for every layer; heads {list(cfg.heads)} differ."
            )
        config_class = getattr(transformers, family.config_class)
        _check_keys(config_class, family, self.config)
        layout: dict[str, Any] = {
            "hidden_size": cfg.d_model,
            "num_hidden_layers": cfg.n_layers,
            "num_attention_heads": cfg.heads[0],
            family.mlp_key: max(1, round(cfg.mlp_ratio * cfg.d_model)),
        }
        if family.kv_heads:
            layout["num_key_value_heads"] = cfg.kv_per_layer[0]
        if family.head_dim:
            layout["head_dim"] = cfg.d_k[0]
        if family.inputs == "images":
            h, w, c = spec.image
            layout |= {"image_size": h if h == w else [h, w], "patch_size": spec.patch, "num_channels": c}
        else:
            layout["max_position_embeddings"] = spec.seq_len
            layout["vocab_size"] = spec.vocab_size if spec.causal else spec.vocab_size + 1
            layout["pad_token_id"] = None if spec.causal else spec.vocab_size
        if not spec.causal:
            layout["num_labels"] = spec.n_classes
        # the task's tokens have no begin or end marks (the classes' defaults, e.g. GPT-2's 50256, lie outside)
        settings = {"bos_token_id": None, "eos_token_id": None} if family.inputs == "tokens" else {}
        with quiet_transformers():
            config = config_class(**(settings | self.config | layout))
        config._attn_implementation = _ATTENTION.get(cfg.attention, "sdpa")
        return config

    def build(self, cfg: ModelConfig, spec: InputSpec) -> HFModel:
        """The transformers model of ``cfg`` for ``spec``'s task, wrapped in :class:`HFModel`, initialised by the
        class's own ``post_init`` from the current torch RNG state."""
        transformers = require_transformers(f"[model] hf = {self.ref[3:]!r}")
        config = self.hf_config(cfg, spec)
        model_class = getattr(transformers, self.class_name(spec))
        with quiet_transformers():
            model = model_class(config)
        return HFModel(model, self.family, spec, list(cfg.heads), list(cfg.kv_per_layer))

    def decoder(
        self,
        cfg: ModelConfig,
        spec: InputSpec,
        batch: int,
        context: int,
        device: torch.device,
        dtype: torch.dtype,
    ) -> Callable[[], None]:
        """One decoding step of ``batch`` sequences against the class's own cache of ``context`` positions,
        filled by a prefill of random tokens; each call cuts the cache back to ``context`` first."""
        model = self.build(cfg, spec).to(device=device, dtype=dtype).eval().hf
        return hf_decode_step(model, spec.vocab_size, batch, context, device)


@functools.cache
def _known_keys(config_class: Any) -> frozenset[str]:
    """The settings a config class knows: its defaults, its constructor's arguments and its aliases."""
    known = set(config_class().to_dict()) | set(inspect.signature(config_class.__init__).parameters)
    return frozenset(known | set(getattr(config_class, "attribute_map", {})))


def _check_keys(config_class: Any, family: HFFamily, config: dict[str, Any]) -> None:
    """Every key of the user's config must be one the config class knows (a typo would be kept silently)."""
    known = _known_keys(config_class)
    for key in config:
        if key not in known:
            near = difflib.get_close_matches(key, sorted(known), n=1)
            hint = f" (did you mean {near[0]!r}?)" if near else ""
            raise ConfigError(
                f"[model] config key {key!r} is not a {family.config_class} setting{hint}; fix or remove it."
            )


def hf_decode_step(
    model: Any, vocab_size: int, batch: int, context: int, device: torch.device
) -> Callable[[], None]:
    """One decoding step of ``batch`` sequences of the transformers causal LM ``model`` (on ``device``, in eval
    mode) against its own cache of ``context`` positions, filled by a prefill of random tokens below
    ``vocab_size``; each call cuts the cache back to ``context`` first."""
    prompt = torch.randint(vocab_size, (batch, context)).to(device)
    token = torch.randint(vocab_size, (batch, 1)).to(device)
    # transformers 5.x names the cache argument and output `cache` (`past_key_values` before, deprecated)
    name = "cache" if "cache" in inspect.signature(model.forward).parameters else "past_key_values"
    with torch.inference_mode():
        cache = getattr(model(input_ids=prompt, use_cache=True), name)

    def step() -> None:
        extra = cache.get_seq_length() - context  # the token the previous step appended
        if extra:
            cache.crop(-extra)  # so every timed step decodes position `context` against the same cache
        model(input_ids=token, use_cache=True, **{name: cache})

    step.cache = cache  # type: ignore[attr-defined]  # for a check that the cache keeps its length
    return step
