"""What a study's task and model are and what it optimizes and limits: the [task], [model], [objectives],
[budgets] and [decode] tables of a spec (explorer.spec._spec reads the rest and re-exports these).

The task's kind decides the quality metric (:func:`explorer.measurements.quality_metric`): a classification
task is scored by validation accuracy (maximized), a language-model task (text) by validation bits per byte
(minimized). Decoding latency and key/value-cache budgets exist only for language-model tasks.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from explorer.errors import SpecError
from explorer.fields import key
from explorer.hooks import REFERENCE_FORM, is_reference
from explorer.layout import DecodeConfig
from explorer.limits import BATCH, EPOCHS
from explorer.measurements import quality_metric
from explorer.spec._toml import is_list, kind, read_table

if TYPE_CHECKING:
    from explorer.model import ModelBuilder


# explorer.data._registry.TASKS and each task's kind; not imported, so parsing a spec stays torch-free (a test
# checks they agree). A user .npz file and a user function are classification tasks.
TASK_KINDS = {
    "digits": "classification",
    "mnist": "classification",
    "relations": "classification",
    "text": "language_model",
}
TASK_NAMES = tuple(TASK_KINDS)
MB = 10**6  # [budgets] max_kv_cache_mb counts megabytes of 10^6 bytes
DISTILL = 0.5  # [model] distill with pretrained: half distillation from the original, half the task's loss


@dataclass(frozen=True)
class ObjectivesSpec:
    """What the study optimizes: the task's quality and latency always, parameters and decoding on request."""

    # validation accuracy (fixed; classification tasks)
    accuracy: str | None = key(
        "maximize", "validation accuracy, always maximized (classification tasks)", choices=("maximize",)
    )
    # validation bits per byte (fixed "minimize"; language-model tasks)
    bpb: str | None = key(
        None,
        "validation bits per byte, always minimized (language-model tasks: `text`)",
        choices=("minimize",),
        shown='`"minimize"`',
    )
    # median forward latency in ms (fixed)
    latency: str = key(
        "minimize", "median forward latency on `[latency] device`, always minimized", choices=("minimize",)
    )
    params: str | None = key(
        None, '`"minimize"` adds the parameter count as a third objective', choices=("minimize",)
    )
    decode: str | None = key(
        None,
        '`"minimize"` adds decoding ms per token (language models); the knee is then taken on decoding time',
        choices=("minimize",),
    )


@dataclass(frozen=True)
class TaskSpec:
    """The task and its training budget."""

    # digits | mnist | relations | text | path to a .npz file | module:function | file.py:function
    name: str = key(
        doc="`digits`, `mnist` (the `mnist` extra), `relations`, `text`, a path ending in `.npz`, or a function: "
        '`"mypkg.data:load"` or `"path/to/data.py:load"` (see [own-model.md](own-model.md))'
    )
    # keyword arguments for explorer.data._registry.load_task
    options: dict[str, Any] = key(
        doc="passed to the task: e.g. `{ n_relations = 4 }` for relations, `{ patch = 4 }` to cut images into "
        '4 x 4 patches, `layout = "chw"` for `[n, C, H, W]` images',
        factory=dict,
        expected="a table such as { n_relations = 4 }",
    )
    # planned epochs per trial (early stopping may run fewer)
    epochs: int = key(10, "a search trial's full budget (a rung may stop it earlier)", cap=EPOCHS)
    batch_size: int = key(64, "training batch size, for search and finalist runs alike", cap=BATCH)

    @property
    def kind(self) -> str:
        """classification | language_model: what the task's targets are (and so how it is scored)."""
        return TASK_KINDS.get(self.name, "classification")


@dataclass(frozen=True)
class ModelSpec:
    """Which model realises each layout: explorer's own (the default), the user's function, or a transformers
    architecture built from its config class."""

    # "module:function" or "file.py:function" (explorer.model._usermodel)
    build: str | None = key(
        None,
        'a function `"mypkg.models:build"` or `"path/to/model.py:build"` that builds your `nn.Module` from the '
        "layout and the task's input spec; checked on one batch before any training",
        shown="none (explorer's own encoder or language model)",
    )
    # a transformers model type (explorer.layout._hf_families)
    hf: str | None = key(
        None,
        "a transformers model type, `bert`, `vit`, `llama`, `mistral`, `qwen2` or `gpt2`: each layout is built "
        "from its config class with the layout's `num_attention_heads` (and `num_key_value_heads`); uniform "
        "layouts only; see [hf.md](hf.md)",
    )
    # the transformers config, all but the heads
    config: dict[str, Any] = key(
        doc="with `hf`: the config for everything but the heads (e.g. `{ hidden_size = 64, num_hidden_layers = "
        "4, intermediate_size = 128 }`); its `hidden_size`, `num_hidden_layers` and `intermediate_size` fill "
        "`[space]` `d_model`, `n_layers` and `mlp_ratio`",
        factory=dict,
        expected='a table such as { hidden_act = "gelu" }',
    )

    # a local transformers checkpoint folder (explorer.pretrained)
    pretrained: str | None = key(
        None,
        "a trained transformers checkpoint, the folder `save_pretrained` wrote (Llama or BERT, safetensors): each "
        "layout is that model with its least important heads removed and its key/value heads mean-pooled into "
        "groups, then recovered by the task's training; see [hf.md](hf.md)",
    )
    # the distillation term's weight in a pretrained candidate's recovery
    distill: float | None = key(
        None,
        "with `pretrained`: the weight of distillation from the original model's predictions in each "
        "candidate's training (KL at temperature 1); the task's loss gets 1 - distill",
        lo=0.0,
        hi=1.0,
        shown="`0.5` with `pretrained`",
    )

    def builder(self) -> ModelBuilder | None:
        """The model builder (:class:`explorer.model._usermodel.ModelBuilder` for ``build``,
        :class:`explorer.model._hfmodel.HFBuilder` for ``hf``), or None for explorer's own (imports torch). A
        ``pretrained`` checkpoint's builder measures head importance on the study's task, so it is made with the
        whole spec: :func:`explorer.study.model_builder`."""
        if self.pretrained is not None:
            raise SpecError(
                "a [model] pretrained study's builder needs its task: make it with explorer.study.model_builder(spec)."
            )
        if self.hf is not None:
            from explorer.model import HFBuilder

            return HFBuilder.of(self.hf, self.config)
        if self.build is None:
            return None
        from explorer.model import ModelBuilder

        return ModelBuilder(self.build)


@dataclass(frozen=True)
class BudgetsSpec:
    """Hard limits; each one set becomes an Optuna constraint (trials over it are infeasible)."""

    max_latency_ms: float | None = key(None, "the forward latency budget")
    max_params: int | None = key(None, "the parameter budget")
    max_decode_ms: float | None = key(None, "ms per generated token (language models)")
    max_kv_cache_mb: float | None = key(
        None, "the key/value cache at `[decode]`'s context and batch, in MB of 10^6 bytes"
    )


def read_objectives(data: Any, task: TaskSpec) -> ObjectivesSpec:
    lm = task.kind == "language_model"
    own, other = ("bpb", "accuracy") if lm else ("accuracy", "bpb")
    if isinstance(data, dict) and other in data:
        metric = quality_metric(task.kind)
        raise SpecError(
            f"{other!r} in [objectives] does not fit task {task.name!r}, which is scored by {metric.label} "
            f'({metric.direction}d); write {own} = "{metric.direction}" or leave it out.'
        )
    read = read_table(ObjectivesSpec, data, "[objectives]")
    if read.decode and not lm:
        raise SpecError(
            f"'decode' in [objectives] needs a language-model task (text); {task.name!r} classifies. Remove it."
        )
    return ObjectivesSpec(
        accuracy=None if lm else "maximize",
        bpb="minimize" if lm else None,
        params=read.params,
        decode=read.decode,
    )


def read_task(data: Any) -> TaskSpec:
    task = read_table(TaskSpec, data, "[task]")
    if task.name not in TASK_NAMES and not task.name.endswith(".npz") and not is_reference(task.name):
        raise SpecError(
            f"'name' in [task] is {task.name!r}; choose {', '.join(TASK_NAMES)}, give a path ending in .npz, or "
            f"name your own function as {REFERENCE_FORM}."
        )
    for option, value in task.options.items():
        # not TOML dates or tables
        scalar: Callable[[Any], bool] = lambda v: isinstance(v, (str, int, float, bool))  # noqa: E731
        if not (scalar(value) or value == [] or is_list(value, scalar)):
            raise SpecError(
                f"task option {option!r} in [task] is {kind(value)}; task options must be strings, numbers, "
                "booleans or lists of them."
            )
    return task


def read_decode(data: Any, task: TaskSpec, wanted: bool) -> DecodeConfig | None:
    """The [decode] table; a decoding objective or budget without one measures at the defaults."""
    if data is None and not wanted:
        return None
    decode = read_table(DecodeConfig, {} if data is None else data, "[decode]")
    if task.kind != "language_model":
        what = "[decode]" if data is not None else "a decoding objective or budget"
        raise SpecError(
            f"{what} needs a language-model task (text); {task.name!r} classifies: remove it or use task text."
        )
    return decode


def read_budgets(data: Any, task: TaskSpec) -> BudgetsSpec:
    budgets = read_table(BudgetsSpec, data, "[budgets]")
    for name in ("max_decode_ms", "max_kv_cache_mb"):
        if getattr(budgets, name) is not None and task.kind != "language_model":
            raise SpecError(
                f"{name!r} in [budgets] needs a language-model task (text); {task.name!r} classifies. Remove it."
            )
    return budgets


def read_model(data: Any, task: TaskSpec, decode: DecodeConfig | None) -> ModelSpec:
    """The [model] table: ``build``, the user's model function (checked for its form here, imported later), or
    ``hf`` with its ``config`` (checked against the space by :mod:`explorer.spec._hf_check`)."""
    model = read_table(ModelSpec, data, "[model]")
    build, hf, config = model.build, model.hf, model.config
    if model.pretrained is not None:
        other = [name for name in ("build", "hf", "config") if isinstance(data, dict) and data.get(name)]
        if other:
            raise SpecError(
                f"[model] has both pretrained and {other[0]}; keep one: a trained checkpoint, your function, or a "
                "transformers model built from its config."
            )
        distill = DISTILL if model.distill is None else model.distill
        return ModelSpec(pretrained=model.pretrained, distill=distill)  # checked by _pretrained_check
    if model.distill is not None:
        raise SpecError(
            "'distill' in [model] weighs distillation from a trained model; add pretrained = \"PATH\" or remove it."
        )
    if hf is not None:
        if build is not None:
            raise SpecError(
                "[model] has both build and hf; keep one: your function, or a transformers model."
            )
        return ModelSpec(hf=hf, config=dict(config))  # checked against the space by explorer.spec._hf_check
    if config:
        raise SpecError(
            "'config' in [model] configures a transformers model; add hf = \"bert\" (or another type)."
        )
    if build is not None and not is_reference(build):
        raise SpecError(f"'build' in [model] is {build!r}; name your model function as {REFERENCE_FORM}.")
    if build is not None and decode is not None:
        raise SpecError(
            "[model] build with decoding latency: timing decoding needs explorer's own language model (its "
            "key/value cache); drop [decode] and the decoding objective or budget, or drop build."
        )
    return ModelSpec(build=build)
