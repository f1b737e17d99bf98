"""Recovery of a shrunk model: a short, stated budget of training that wins back some of what head surgery cost,
and the two measures that say how much it won.

A model cut by :func:`~explorer.pretrained.shrink` predicts worse than the model it was cut from. The published
recipes retrain it briefly: Ainslie et al. (2023, "GQA") uptrain a mean-pooled checkpoint on its own objective for
a small fraction of its original steps; Michel et al. (2019, "Are Sixteen Heads Really Better than One?")
fine-tune on the task after pruning heads; NVIDIA's Minitron (Muralidharan et al. 2024, "Compact Language Models
via Pruning and Knowledge Distillation") distils the original model's logits into the pruned one (forward KL,
logits alone, at temperature 1 was its best choice, hence the defaults here). :func:`recover` trains the student in
place on both, weighted by ``Recovery.distill``:

    loss = (1 - distill) * task + distill * T^2 * KL(softmax(teacher / T) || softmax(student / T))

The ``T^2`` (Hinton et al. 2015) keeps the soft term's gradients on the task term's scale as ``T`` changes. The task
loss is the cross-entropy on the class logits for a BERT classifier, and on the next token at every position for
a Llama causal LM, whose distillation term is the KL of every attended position's next-token distribution. The
optimizer is AdamW at a constant learning rate without weight decay (the budget is short, and the student should
stay near the trained weights it starts from); the minibatches are drawn without replacement, reshuffled on each
pass, from a generator seeded by ``Recovery.seed``, which also seeds the student's dropout (inside a forked RNG,
so the caller's random state is left as it was). The teacher runs in eval mode without gradients.

:func:`distillation_gap` (the mean KL at temperature 1 from the teacher's predictions to the student's) and
:func:`accuracy` (of the class, or of the next token) measure a model on held-out examples, batch by batch.
Every input is checked before anything runs, each refusal a one-line :class:`~explorer.errors.ConfigError` (or
:class:`~explorer.errors.LimitError` for a size): the models (families, what they predict, a student that is
not the teacher), the examples (shapes, token ids the embedding has, labels the classifier has) and the memory
one batch's logits take.
"""

from __future__ import annotations

import contextlib
import math
import numbers
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, fields
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

from explorer.errors import ConfigError, TrainingDivergedError
from explorer.limits import BATCH, SEQ_LEN, STEPS, check_memory
from explorer.pretrained._layout import attention_modules

EVAL_BATCH = 32  # examples per forward pass when a model is measured
# float32 tensors of one batch's [rows, positions, outputs] that a training step holds at most: both models'
# logits and their log-softmaxes, the KL's terms, the cross-entropy's log-softmax, and gradients back through them
_LOGIT_COPIES = 8
_FLOAT32 = 4


@dataclass(frozen=True)
class Recovery:
    """The fixed budget of one recovery, stated whole: refused at construction if a value is not usable."""

    steps: int = 100  # optimizer steps, one minibatch each: the whole budget
    lr: float = 1e-4  # AdamW's learning rate, constant
    distill: float = 1.0  # weight of the distillation term, 0..1; the task loss gets 1 - distill
    temperature: float = 1.0  # T: both models' logits are divided by it in the distillation term
    batch_size: int = 8  # examples per step (all of them, when there are fewer)
    seed: int = 0  # the minibatches drawn and the student's dropout

    def __post_init__(self) -> None:
        # numpy numbers are accepted and kept as Python ones, so a budget compares and prints as it was meant
        for name in ("steps", "batch_size", "seed"):
            value = getattr(self, name)
            _whole(f"Recovery {name}", value, _FIX[name], lowest=0 if name == "seed" else 1)
            object.__setattr__(self, name, int(value))
        for name in ("lr", "temperature", "distill"):
            value = getattr(self, name)
            if not _real(value):
                raise ConfigError(f"Recovery {name}={value!r} is not a finite number; give {_FIX[name]}.")
            object.__setattr__(self, name, float(value))
        STEPS.check(self.steps, "Recovery steps", "give fewer steps")
        BATCH.check(self.batch_size, "Recovery batch_size", "give fewer examples per step")
        if self.seed >= 2**63:
            raise ConfigError(f"Recovery seed={self.seed} is not below 2**63; give a smaller seed.")
        for name in ("lr", "temperature"):
            if getattr(self, name) <= 0:
                raise ConfigError(
                    f"Recovery {name}={getattr(self, name)!r} is not above 0; give {_FIX[name]}."
                )
        if not 0 <= self.distill <= 1:
            raise ConfigError(
                f"Recovery distill={self.distill!r} is not a weight from 0 to 1; give {_FIX['distill']}."
            )


# how each of Recovery's values is given, as a refusal says it
_FIX = {
    "steps": "the optimizer steps to train, e.g. steps=100",
    "batch_size": "the examples per step, e.g. batch_size=8",
    "seed": "a seed from 0, e.g. seed=0",
    "lr": "a learning rate such as lr=1e-4",
    "temperature": "a temperature such as temperature=1.0",
    "distill": "0 (the task loss alone), 1 (distillation alone) or a weight between",
}


def _real(value: Any) -> bool:
    return isinstance(value, numbers.Real) and not isinstance(value, bool) and math.isfinite(value)


def _whole(name: str, value: Any, fix: str, lowest: int = 1) -> None:
    """A one-line ConfigError unless ``value`` is an integer (not a bool) of at least ``lowest``."""
    if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value < lowest:
        raise ConfigError(f"{name}={value!r} is not a whole number of at least {lowest}; give {fix}.")


@dataclass(frozen=True)
class Examples:
    """Token sequences a model reads, with a classifier's labels: what :func:`recover` trains on and the
    measures read. A mapping with these keys (a tokenizer's output, say) is taken as well."""

    input_ids: torch.Tensor  # [N, T] token ids
    # [N] a classifier's class ids; a causal LM learns input_ids' next tokens and takes none
    labels: torch.Tensor | None = None
    attention_mask: torch.Tensor | None = None  # [N, T] 1 at a token, 0 at padding; None: every position

    def __post_init__(self) -> None:
        ids, labels, mask = self.input_ids, self.labels, self.attention_mask
        if not isinstance(ids, torch.Tensor) or ids.dim() != 2 or not _integral(ids) or ids.numel() == 0:
            raise ConfigError(
                f"input_ids is {_described(ids)}; give token ids as a 2-D integer tensor [examples, tokens], "
                "not empty."
            )
        n = len(ids)
        if labels is not None and (
            not isinstance(labels, torch.Tensor) or labels.shape != (n,) or not _integral(labels)
        ):
            raise ConfigError(
                f"labels is {_described(labels)}; give one integer class id per example, a tensor of shape ({n},)."
            )
        if mask is None:
            return
        if not isinstance(mask, torch.Tensor) or mask.shape != ids.shape:
            raise ConfigError(
                f"attention_mask is {_described(mask)}; give one 0 or 1 per token, a tensor of input_ids' shape "
                f"{tuple(ids.shape)}."
            )
        if not ((mask == 0) | (mask == 1)).all():
            raise ConfigError(
                "attention_mask holds values other than 0 and 1; give 1 at a token, 0 at padding."
            )
        empty = (~mask.bool().any(dim=1)).nonzero()
        if len(empty):
            raise ConfigError(
                f"example {int(empty[0])} has no token its attention_mask keeps; drop it or unmask a token."
            )

    def __len__(self) -> int:
        return len(self.input_ids)

    @property
    def tokens(self) -> int:
        """Positions of each example (T)."""
        return self.input_ids.shape[1]

    def rows(self, index: torch.Tensor) -> Examples:
        """The examples at ``index`` (a 1-D tensor of row numbers), in that order."""
        return self._each(lambda t: t[index])

    def to(self, device: torch.device) -> Examples:
        return self._each(lambda t: t.to(device))

    def _each(self, change: Callable[[torch.Tensor], torch.Tensor]) -> Examples:
        labels, mask = self.labels, self.attention_mask
        return Examples(
            change(self.input_ids),
            None if labels is None else change(labels),
            None if mask is None else change(mask),
        )


def _described(value: Any) -> str:
    """What a value is, as a refusal names it: a tensor's dtype and shape, or anything else's type."""
    if isinstance(value, torch.Tensor):
        return f"a {value.dtype} tensor of shape {tuple(value.shape)}"
    return f"a {type(value).__name__}"


# Examples, or a mapping of its keys (a tokenizer's output, say)
ExamplesLike = Examples | Mapping[str, torch.Tensor]


def _integral(t: torch.Tensor) -> bool:
    return not t.dtype.is_floating_point and not t.dtype.is_complex and t.dtype != torch.bool


def as_examples(examples: ExamplesLike) -> Examples:
    """``examples`` as :class:`Examples`: as they are, or read from a mapping of its three keys."""
    if isinstance(examples, Examples):
        return examples
    if not isinstance(examples, Mapping):
        raise ConfigError(
            f"examples are a {type(examples).__name__}; give Examples(input_ids, labels, attention_mask) or a "
            "mapping of those keys."
        )
    known = [f.name for f in fields(Examples)]
    unknown = sorted(str(k) for k in examples if k not in known)
    if unknown:
        raise ConfigError(
            f"examples hold {', '.join(unknown)}, which are not used; give {', '.join(known)} only."
        )
    if "input_ids" not in examples:
        raise ConfigError("examples hold no input_ids; give the token ids as a 2-D integer tensor.")
    return Examples(**examples)


@dataclass(frozen=True)
class _Predicts:
    """What a supported model predicts: the next token (a causal LM) or a class, out of ``outputs``."""

    causal: bool
    outputs: int  # the width of its logits: the vocabulary, or the labels
    vocab: int  # token ids its embedding has
    positions: int | None  # the most positions it reads (BERT's position embedding); None: no such limit

    def says(self) -> str:
        return f"the next token of {self.outputs}" if self.causal else f"one of {self.outputs} classes"


def _predicts(model: nn.Module) -> _Predicts:
    """What ``model`` predicts: a Llama causal LM or a BERT sequence classifier, else a one-line ConfigError."""
    family, _ = attention_modules(model)
    from transformers import BertForSequenceClassification, LlamaForCausalLM

    model_: Any = model
    vocab = model_.get_input_embeddings().num_embeddings
    if family == "llama" and isinstance(model, LlamaForCausalLM):
        return _Predicts(True, model_.get_output_embeddings().out_features, vocab, None)
    if family == "bert" and isinstance(model, BertForSequenceClassification):
        labels = model_.classifier.out_features
        if labels < 2:
            raise ConfigError(
                f"{type(model).__name__} has {labels} output (a regression); recovery distils class "
                "probabilities: give a classifier with num_labels of at least 2."
            )
        return _Predicts(False, labels, vocab, model_.config.max_position_embeddings)
    raise ConfigError(
        f"{type(model).__name__} has no logits to recover (no language-model or classifier head); give a "
        "LlamaForCausalLM or a BertForSequenceClassification."
    )


def _pair(student: nn.Module, teacher: nn.Module) -> _Predicts:
    """What both models predict, checked to be the same."""
    predicts, taught = _predicts(student), _predicts(teacher)
    if (predicts.causal, predicts.outputs, predicts.vocab) != (taught.causal, taught.outputs, taught.vocab):
        raise ConfigError(
            f"the student ({type(student).__name__}) predicts {predicts.says()} from {predicts.vocab} token ids "
            f"and the teacher ({type(teacher).__name__}) {taught.says()} from {taught.vocab}; give the model the "
            "student was cut from as its teacher."
        )
    return predicts


def _check_examples(data: Examples, predicts: _Predicts, without_labels: str | None) -> None:
    """``data`` against what the model reads and predicts; a one-line ConfigError where it does not fit, and
    ``without_labels`` where a classifier's examples have no labels (None: they need none)."""
    SEQ_LEN.check(data.tokens, "the examples' tokens per example", "give shorter examples")
    if predicts.positions is not None and data.tokens > predicts.positions:
        raise ConfigError(
            f"the examples have {data.tokens} tokens and the model reads at most {predicts.positions} "
            "positions; cut them to that length."
        )
    low, high = int(data.input_ids.min()), int(data.input_ids.max())
    if low < 0 or high >= predicts.vocab:
        bad = low if low < 0 else high
        raise ConfigError(
            f"input_ids hold token {bad}, and the model's embedding has tokens 0 to {predicts.vocab - 1}; "
            "tokenize with the model's own tokenizer."
        )
    if predicts.causal:
        if data.labels is not None:
            raise ConfigError(
                "a causal LM learns the next token of input_ids and takes no labels; drop them."
            )
        kept = data.tokens if data.attention_mask is None else int(data.attention_mask.sum(dim=1).min())
        if kept < 2:
            raise ConfigError(
                "an example holds fewer than 2 tokens, which leaves no next token to predict; give examples of "
                "at least 2 tokens."
            )
        return
    if data.labels is None:
        if without_labels is not None:
            raise ConfigError(without_labels)
        return
    low, high = int(data.labels.min()), int(data.labels.max())
    if low < 0 or high >= predicts.outputs:
        raise ConfigError(
            f"labels hold class {low if low < 0 else high}, and the classifier has classes 0 to "
            f"{predicts.outputs - 1}; give labels in that range."
        )


def _check_batch_memory(rows: int, data: Examples, predicts: _Predicts, device: torch.device) -> None:
    """One batch's logits (and what is computed from them) against the memory this command may take."""
    estimate = rows * (data.tokens if predicts.causal else 1) * predicts.outputs * _FLOAT32 * _LOGIT_COPIES
    check_memory(
        estimate,
        f"a batch of {rows} examples of {data.tokens} tokens ({predicts.outputs} logits per prediction)",
        "give a smaller batch_size or shorter examples",
        device,
    )


def _device(model: nn.Module) -> torch.device:
    return next(model.parameters()).device


def _logits(model: nn.Module, batch: Examples, predicts: _Predicts) -> torch.Tensor:
    """The model's logits on ``batch``, in float32: [B, T, vocab] for a causal LM, [B, labels] for a classifier."""
    batch = batch.to(_device(model))
    options = {"use_cache": False} if predicts.causal else {}
    out = model(input_ids=batch.input_ids, attention_mask=batch.attention_mask, **options)
    return out.logits.float()


def _weights(batch: Examples, shape: torch.Size) -> torch.Tensor:
    """1 for each prediction that counts, 0 for padding: the attention mask of a causal LM's positions [B, T], or
    one per example [B]."""
    if len(shape) == 1 or batch.attention_mask is None:
        return torch.ones(shape)
    return batch.attention_mask.float()


def _next(logits: torch.Tensor, batch: Examples, predicts: _Predicts) -> tuple[torch.Tensor, ...]:
    """The logits that predict a target, the targets, and which count: a causal LM's position t predicts token
    t + 1 where both are tokens, a classifier's logits predict the label."""
    if not predicts.causal:
        assert batch.labels is not None  # checked by _check_examples
        return logits, batch.labels.to(logits.device), torch.ones(len(logits), device=logits.device)
    weights = _weights(batch, logits.shape[:2]).to(logits.device)  # [B, T]
    # [B, T - 1, vocab] and [B, T - 1]: position t predicts token t + 1
    return logits[:, :-1], batch.input_ids[:, 1:].to(logits.device), weights[:, 1:] * weights[:, :-1]


def _task_sum(
    logits: torch.Tensor, batch: Examples, predicts: _Predicts
) -> tuple[torch.Tensor, torch.Tensor]:
    """The cross-entropy summed over the predictions that count, and their number."""
    predicted, target, weights = _next(logits, batch, predicts)
    loss = F.cross_entropy(predicted.flatten(0, -2), target.flatten(), reduction="none")  # [predictions]
    return (loss * weights.flatten()).sum(), weights.sum()


def _kl_sum(
    student: torch.Tensor, teacher: torch.Tensor, batch: Examples, temperature: float
) -> tuple[torch.Tensor, torch.Tensor]:
    """KL(softmax(teacher / T) || softmax(student / T)) summed over every prediction that counts (each attended
    position of a causal LM, each example of a classifier), and their number."""
    kl = F.kl_div(
        F.log_softmax(student / temperature, dim=-1),
        F.log_softmax(teacher / temperature, dim=-1),
        log_target=True,
        reduction="none",
    ).sum(dim=-1)  # [B, T] or [B]
    weights = _weights(batch, kl.shape).to(kl.device)
    return (kl * weights).sum(), weights.sum()


@contextlib.contextmanager
def _eval_mode(*models: nn.Module) -> Iterator[None]:
    """The models in eval mode for the block, each put back in the mode it was in after."""
    modes = [m.training for m in models]
    for m in models:
        m.eval()
    try:
        yield
    finally:
        for m, mode in zip(models, modes, strict=True):
            m.train(mode)


@dataclass(frozen=True)
class RecoveryResult:
    """What a recovery did: the training loss of each step and how long it took."""

    losses: tuple[float, ...]  # the loss of each step, in order, before that step's update
    seconds: float  # wall time of the training steps


def _step_loss(
    student: nn.Module, teacher: nn.Module, batch: Examples, predicts: _Predicts, recovery: Recovery
) -> torch.Tensor:
    """The weighted loss of one minibatch (a term of weight 0 is not computed: its model is not run)."""
    logits = _logits(student, batch, predicts)
    loss = logits.new_zeros(())
    if recovery.distill < 1:
        total, count = _task_sum(logits, batch, predicts)
        loss = loss + (1 - recovery.distill) * total / count.clamp(min=1)
    if recovery.distill > 0:
        with torch.no_grad():
            taught = _logits(teacher, batch, predicts).to(logits.device)
        total, count = _kl_sum(logits, taught, batch, recovery.temperature)
        loss = loss + recovery.distill * recovery.temperature**2 * total / count.clamp(min=1)
    return loss


def _minibatches(n: int, size: int, steps: int, generator: torch.Generator) -> Iterator[torch.Tensor]:
    """``steps`` batches of row numbers, ``min(size, n)`` each, drawn without replacement from a shuffled order
    that is drawn again when too few rows are left in it."""
    size = min(size, n)
    order, at = torch.randperm(n, generator=generator), 0
    for _ in range(steps):
        if at + size > n:
            order, at = torch.randperm(n, generator=generator), 0
        yield order[at : at + size]
        at += size


def _trained(student: nn.Module, teacher: nn.Module) -> list[nn.Parameter]:
    """The student's parameters that train: none of them the teacher's, and at least one."""
    own = {id(p) for p in teacher.parameters()}
    shared = sum(id(p) in own for p in student.parameters())
    if shared:
        raise ConfigError(
            f"the student shares {shared} parameters with the teacher, so training it would change the teacher; "
            "give the copy shrink returned as the student."
        )
    params = [p for p in student.parameters() if p.requires_grad]
    if not params:
        raise ConfigError(
            "the student has no parameter that requires a gradient; unfreeze the ones to train."
        )
    return params


def recover(
    student: nn.Module,
    teacher: nn.Module,
    examples: ExamplesLike,
    recovery: Recovery | None = None,
    on_step: Callable[[int, float], None] | None = None,
) -> RecoveryResult:
    """Train ``student`` in place for ``recovery.steps`` steps towards ``teacher`` and the task (see the module
    docstring); ``teacher`` is left as it was. ``on_step(step, loss)`` is called after each step (from 1). A loss
    that becomes NaN or infinite raises :class:`~explorer.errors.TrainingDivergedError` before that step's update.
    The student is in eval mode afterwards, however training ends."""
    recovery = recovery or Recovery()
    data = as_examples(examples)
    predicts = _pair(student, teacher)
    _check_examples(
        data,
        predicts,
        "the classifier's task loss needs labels and the examples have none; give labels, or distill=1 to "
        "learn from the teacher alone."
        if recovery.distill < 1
        else None,
    )
    params = _trained(student, teacher)
    device = params[0].device
    _check_batch_memory(min(recovery.batch_size, len(data)), data, predicts, device)
    optimizer = torch.optim.AdamW(params, lr=recovery.lr, weight_decay=0.0)
    draws = torch.Generator().manual_seed(recovery.seed)
    # the CUDA generator the student's dropout draws on, forked with the CPU's
    cuda = [device.index or 0] if device.type == "cuda" else []
    losses: list[float] = []
    start = time.perf_counter()
    try:
        with _eval_mode(teacher), torch.random.fork_rng(devices=cuda):
            torch.manual_seed(recovery.seed)  # the student's dropout
            student.train()
            for step, index in enumerate(
                _minibatches(len(data), recovery.batch_size, recovery.steps, draws), 1
            ):
                loss = _step_loss(student, teacher, data.rows(index), predicts, recovery)
                value = loss.item()
                if not math.isfinite(value):
                    raise TrainingDivergedError(
                        f"the recovery loss became {value} at step {step} of {recovery.steps}; lower the learning "
                        f"rate (lr={recovery.lr:g})."
                    )
                optimizer.zero_grad(set_to_none=True)
                loss.backward()
                optimizer.step()
                losses.append(value)
                if on_step is not None:
                    on_step(step, value)
    finally:
        student.eval()
    return RecoveryResult(tuple(losses), time.perf_counter() - start)


def _measured(
    model: nn.Module, examples: ExamplesLike, batch_size: int, predicts: _Predicts, without_labels: str | None
) -> Examples:
    """The examples a measure reads, checked with its batch size (and the memory one batch takes) first."""
    _whole("batch_size", batch_size, "the examples per forward pass, e.g. batch_size=32")
    BATCH.check(batch_size, "batch_size", "give fewer examples per forward pass")
    data = as_examples(examples)
    _check_examples(data, predicts, without_labels)
    _check_batch_memory(min(batch_size, len(data)), data, predicts, _device(model))
    return data


def _chunks(n: int, batch_size: int) -> Iterator[torch.Tensor]:
    """Row numbers ``batch_size`` at a time, in order."""
    for first in range(0, n, batch_size):
        yield torch.arange(first, min(first + batch_size, n))


def distillation_gap(
    student: nn.Module, teacher: nn.Module, examples: ExamplesLike, batch_size: int = EVAL_BATCH
) -> float:
    """The mean KL(softmax(teacher) || softmax(student)) at temperature 1 over ``examples`` (every attended
    position of a causal LM, every example of a classifier), in nats: 0 for a student that predicts as its
    teacher does. Both models run in eval mode, ``batch_size`` examples at a time."""
    predicts = _pair(student, teacher)
    data = _measured(student, examples, batch_size, predicts, None)
    total = count = 0.0
    with torch.inference_mode(), _eval_mode(student, teacher):
        for index in _chunks(len(data), batch_size):
            batch = data.rows(index)
            logits = _logits(student, batch, predicts)
            kl, n = _kl_sum(logits, _logits(teacher, batch, predicts).to(logits.device), batch, 1.0)
            total, count = total + kl.item(), count + n.item()
    return total / count


def _mean_over_predictions(
    model: nn.Module,
    examples: ExamplesLike,
    batch_size: int,
    what: str,
    term: Callable[[torch.Tensor, Examples, _Predicts], tuple[torch.Tensor, torch.Tensor]],
) -> float:
    """``term``'s sum over the predictions that count, divided by their number, over ``examples`` read
    ``batch_size`` at a time with the model in eval mode; ``what`` names the measure when labels are missing."""
    predicts = _predicts(model)
    without_labels = f"a classifier's {what} needs labels and the examples have none; give labels."
    data = _measured(model, examples, batch_size, predicts, without_labels)
    total = count = 0.0
    with torch.inference_mode(), _eval_mode(model):
        for index in _chunks(len(data), batch_size):
            batch = data.rows(index)
            value, n = term(_logits(model, batch, predicts), batch, predicts)
            total, count = total + value.item(), count + n.item()
    return total / count


def _correct_sum(
    logits: torch.Tensor, batch: Examples, predicts: _Predicts
) -> tuple[torch.Tensor, torch.Tensor]:
    """The predictions the largest logit gets right, summed over those that count, and their number."""
    predicted, target, weights = _next(logits, batch, predicts)
    return ((predicted.argmax(dim=-1) == target).float() * weights).sum(), weights.sum()


def accuracy(model: nn.Module, examples: ExamplesLike, batch_size: int = EVAL_BATCH) -> float:
    """The fraction of ``examples``' predictions the model's largest logit gets right: the class of each example
    for a classifier (its labels needed), the next token at every attended position for a causal LM. The model
    runs in eval mode, ``batch_size`` examples at a time."""
    return _mean_over_predictions(model, examples, batch_size, "accuracy", _correct_sum)


def cross_entropy(model: nn.Module, examples: ExamplesLike, batch_size: int = EVAL_BATCH) -> float:
    """The model's mean cross-entropy on ``examples``, in nats: of each example's class for a classifier (its labels
    needed), of the next token at every attended position for a causal LM (divided by ln 2: bits per token, the
    text task's bits per byte). The model runs in eval mode, ``batch_size`` examples at a time."""
    return _mean_over_predictions(model, examples, batch_size, "cross-entropy", _task_sum)
