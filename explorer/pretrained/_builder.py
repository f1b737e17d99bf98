"""A trained checkpoint as a study's model (``[model] pretrained = "PATH"``): each layout is the checkpoint with its
least important heads removed and its key/value heads pooled into groups, then recovered by the study's training.

:class:`PretrainedBuilder` plays the part of a user's model function (as
:class:`~explorer.model.HFBuilder` does for a class built from its config), so the search, the finalists, latency
and decoding on the device, the rule and the report treat a cut checkpoint as they treat any model. For a layout
(query heads and key/value heads per layer) it keeps each layer's most important heads
(:func:`~explorer.pretrained.plan_by_importance`) and regroups its key/value heads by mean-pooling
(:func:`~explorer.pretrained.shrink`); the layout with every head is the original model, unchanged.

Importance is measured once a process, on the first :data:`IMPORTANCE_EXAMPLES` examples of the task's training
split, against the original's own predictions (a classifier's argmax; a causal LM's own next tokens, which are
its input): no label chooses a head, so no evaluation fold's labels reach the choice. The scores are rounded to
six significant digits before heads are ranked (ties: the lower index), so every worker process keeps the same
heads for the same layout.

Training a candidate is its recovery: :class:`PretrainedModel` carries the original as its teacher (not a
submodule: neither trained nor saved with it), and explorer's training loop adds the distillation term through
:meth:`PretrainedModel.recovery_loss`: ``(1 - distill) * task + distill * KL(teacher || student)`` at temperature 1,
averaged over every prediction (Minitron's choice; :mod:`explorer.pretrained._recover` says why).
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import json
from collections.abc import Callable
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from explorer.errors import ConfigError
from explorer.hooks import checkpoint_digest
from explorer.layout import HF_FAMILIES, InputSpec, ModelConfig
from explorer.model import HFModel, ModelBuilder, hf_decode_step, require_transformers
from explorer.pretrained._importance import HeadImportance, head_importance, plan_by_importance
from explorer.pretrained._load import Checkpoint, inspect_checkpoint, load_checkpoint
from explorer.pretrained._plan import HeadPlan
from explorer.pretrained._surgery import shrink

IMPORTANCE_EXAMPLES = 512  # examples of the training split head importance is measured on
# explorer's attention names -> transformers' implementations
_ATTENTION = {"fused": "sdpa", "merged": "eager"}
_PREDICT_BATCH = 64
_STUDIED = (
    "LlamaForCausalLM",
    "BertForSequenceClassification",
)  # the classes whose predictions a study scores


class PretrainedModel(HFModel):
    """A cut checkpoint as explorer trains and times it: :class:`~explorer.model.HFModel` with the original model as
    the teacher of its recovery (``recovery_loss``) and the plan it was cut by (``plan``)."""

    def __init__(
        self, model: nn.Module, spec: InputSpec, plan: HeadPlan, teacher: nn.Module, distill: float
    ) -> None:
        hf: Any = model  # a transformers PreTrainedModel (transformers is an optional extra, typed Any)
        family = HF_FAMILIES[str(hf.config.model_type)]
        super().__init__(model, family, spec, list(plan.heads), list(plan.kv_heads))
        self.plan = plan
        self.distill = distill
        # kept out of the module tree: the teacher is neither trained, moved with the student nor saved with it
        object.__setattr__(self, "_teacher", teacher)

    def _teacher_logits(self, x: torch.Tensor) -> torch.Tensor:
        teacher: nn.Module = self.__dict__["_teacher"]
        first = next(teacher.parameters())
        if first.device != x.device:
            teacher.to(x.device)
        teacher.eval()
        with torch.no_grad():
            return teacher(**{"input_ids": x}, **self._extra).logits

    def recovery_loss(self, x: torch.Tensor, logits: torch.Tensor, task_loss: torch.Tensor) -> torch.Tensor:
        """The training loss of a batch: ``(1 - distill) * task_loss + distill * KL(teacher || student)``, the KL
        at temperature 1 averaged over every prediction (each example of a classifier, each position of a causal
        LM)."""
        if self.distill == 0:
            return task_loss
        taught = self._teacher_logits(x)
        kl = F.kl_div(
            F.log_softmax(logits.float(), dim=-1),
            F.log_softmax(taught.float(), dim=-1),
            log_target=True,
            reduction="none",
        ).sum(dim=-1)
        return (1 - self.distill) * task_loss + self.distill * kl.mean()


@dataclasses.dataclass(frozen=True, kw_only=True)
class PretrainedBuilder(ModelBuilder):
    """Builds each layout from the checkpoint at ``ref`` (``pretrained:PATH``), heads chosen on the task
    (``task_name``, ``task_options_json``), recovered with distillation weight ``distill``."""

    task_name: str
    task_options_json: str
    distill: float

    @classmethod
    def of(cls, path: str, task_name: str, task_options: dict[str, Any], distill: float) -> PretrainedBuilder:
        """The builder for ``[model] pretrained = path`` on the task; transformers must be installed."""
        require_transformers(f"[model] pretrained = {path!r}")
        options = json.dumps(task_options, sort_keys=True)
        return cls(
            f"pretrained:{path}", task_name=task_name, task_options_json=options, distill=float(distill)
        )

    def __getstate__(self) -> dict[str, Any]:
        """The fields alone: a process this builder is sent to loads the checkpoint itself (the cached model,
        importance and fingerprint stay behind)."""
        return {f.name: getattr(self, f.name) for f in dataclasses.fields(self)}

    def __setstate__(self, state: dict[str, Any]) -> None:
        for name, value in state.items():
            object.__setattr__(self, name, value)

    @property
    def path(self) -> str:
        return self.ref.removeprefix("pretrained:")

    @functools.cached_property
    def checkpoint(self) -> Checkpoint:
        """The checkpoint, read and checked (sizes, this machine's memory) before anything is loaded."""
        return inspect_checkpoint(self.path)

    @functools.cached_property
    def function(self) -> Any:
        return self.build

    @functools.cached_property
    def fingerprint(self) -> str:
        """sha256 of what the candidates depend on: the checkpoint's files, the task the heads are chosen on, the
        distillation weight and the transformers release."""
        transformers = require_transformers(f"[model] pretrained = {self.path!r}")
        text = (
            f"{checkpoint_digest(self.checkpoint.path)}|{self.task_name}|{self.task_options_json}|"
            f"{self.distill!r}|transformers{transformers.__version__}"
        )
        return hashlib.sha256(text.encode()).hexdigest()

    @functools.cached_property
    def original(self) -> Any:
        """The checkpoint's model, loaded once a process, in float32 and eval mode."""
        return load_checkpoint(self.checkpoint).float().eval()

    @property
    def decodes(self) -> bool:
        """Whether the candidates can time decoding (a causal LM with a key/value cache)."""
        return self.checkpoint.causal

    def _check_input(self, spec: InputSpec) -> None:
        """The task must be the kind the checkpoint was trained for, with tokens and classes it has."""
        c, config = self.checkpoint, self.original.config
        where = f"the checkpoint at {self.path!r} ({c.architecture})"
        if c.architecture not in _STUDIED:
            raise ConfigError(
                f"{where} is a base model without a task head, and a study scores its predictions; give a "
                f"{' or '.join(_STUDIED)} checkpoint."
            )
        if spec.kind != "tokens":
            raise ConfigError(
                f"{where} reads token ids, and this task feeds {spec.n_features} features a position; give a "
                "token task."
            )
        if spec.causal != c.causal:
            what = "language modelling" if spec.causal else "classification"
            raise ConfigError(f"{where} does not do {what}; give a task of the kind it was trained for.")
        if spec.vocab_size > config.vocab_size:
            raise ConfigError(
                f"{where} embeds {config.vocab_size} token ids and the task uses {spec.vocab_size}; give the task "
                "the checkpoint was trained on."
            )
        # a BERT's positions are a table; Llama's rotary positions have none
        if c.model_type == "bert" and spec.seq_len > config.max_position_embeddings:
            raise ConfigError(
                f"{where} has {config.max_position_embeddings} positions and the task's sequences are "
                f"{spec.seq_len} long; give shorter sequences."
            )
        if not spec.causal and getattr(config, "num_labels", spec.n_classes) != spec.n_classes:
            raise ConfigError(
                f"{where} has {config.num_labels} classes and the task {spec.n_classes}; give the task it was "
                "trained on."
            )

    @functools.cached_property
    def importance(self) -> HeadImportance:
        """Each head's importance on the task's first training examples, against the original's own predictions
        (see the module docstring), rounded so that every process ranks heads alike."""
        from explorer.data import load_task

        task = load_task(self.task_name, **json.loads(self.task_options_json))
        x = task.train[0][:IMPORTANCE_EXAMPLES]
        examples: dict[str, torch.Tensor] = {"input_ids": x}
        if not self.checkpoint.causal:
            with torch.inference_mode():
                examples["labels"] = torch.cat(
                    [
                        self.original(input_ids=x[i : i + _PREDICT_BATCH]).logits.argmax(-1)
                        for i in range(0, len(x), _PREDICT_BATCH)
                    ]
                )
        with torch.random.fork_rng(devices=[]):
            measured = head_importance(self.original, examples)
        rounded = tuple(np.array([float(f"{v:.6g}") for v in layer]) for layer in measured.scores)
        return HeadImportance(rounded, measured.examples)

    def plan(self, cfg: ModelConfig) -> HeadPlan:
        """The heads layout ``cfg`` keeps: each layer's most important ones, with its key/value heads."""
        layout_heads = self.checkpoint.heads
        if any(h > layout_heads for h in cfg.heads):
            raise ConfigError(
                f"heads {list(cfg.heads)} ask for more than the checkpoint's {layout_heads} a layer; surgery only "
                "removes heads."
            )
        if cfg.heads == (layout_heads,) * len(cfg.heads) and cfg.kv_per_layer == (
            self.checkpoint.kv_heads,
        ) * len(cfg.heads):
            return HeadPlan.unchanged(self.original)
        return plan_by_importance(self.original, self.importance, cfg.heads, cfg.kv_per_layer)

    def build(self, cfg: ModelConfig, spec: InputSpec) -> PretrainedModel:
        """The checkpoint cut to ``cfg``'s heads for ``spec``'s task, wrapped in :class:`PretrainedModel`."""
        self._check_input(spec)
        plan = self.plan(cfg)
        model = shrink(self.original, plan)  # a copy; the original stays whole
        model.set_attn_implementation(_ATTENTION.get(cfg.attention, "sdpa"))
        return PretrainedModel(model, spec, plan, self.original, self.distill)

    def decoder(
        self,
        cfg: ModelConfig,
        spec: InputSpec,
        batch: int,
        context: int,
        device: torch.device,
        dtype: torch.dtype,
    ) -> Callable[[], None]:
        """One decoding step of ``batch`` sequences against the model's own cache of ``context`` positions."""
        model = self.build(cfg, spec).to(device=device, dtype=dtype).eval().hf
        return hf_decode_step(model, spec.vocab_size, batch, context, device)
