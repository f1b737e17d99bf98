"""What a study's task and model are and what it optimizes and limits: the [task], [model], [objectives],
[budgets] and [decode] tables of a spec (explorer.search.spec reads the rest and re-exports these).

The task's kind decides the quality metric (:func:`explorer.engine.measures.quality_metric`): a classification
task is scored by validation accuracy (maximized), a language-model task (text) by validation bits per byte
(minimized). Decoding latency and key/value-cache budgets exist only for language-model tasks.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from explorer.engine.config import DecodeConfig
from explorer.engine.hooks import REFERENCE_FORM, is_reference
from explorer.engine.measures import quality_metric
from explorer.errors import SpecError
from explorer.search.spec_keys import SPEC_KEYS
from explorer.search.toml_table import Table, is_list, kind

__all__ = [
    "MB",
    "TASK_KINDS",
    "TASK_NAMES",
    "BudgetsSpec",
    "ModelSpec",
    "ObjectivesSpec",
    "TaskSpec",
    "read_budgets",
    "read_decode",
    "read_model",
    "read_objectives",
    "read_task",
]

# explorer.engine.tasks.TASKS and each task's kind; not imported, so parsing a spec stays torch-free (a test
# checks they agree). A user .npz file and a user function are classification tasks.
TASK_KINDS = {
    "digits": "classification",
    "mnist": "classification",
    "relations": "classification",
    "text": "language_model",
}
TASK_NAMES = tuple(TASK_KINDS)
MB = 10**6  # [budgets] max_kv_cache_mb counts megabytes of 10^6 bytes


@dataclass(frozen=True)
class ObjectivesSpec:
    """What the study optimizes: the task's quality and latency always, parameters and decoding on request."""

    accuracy: str | None = "maximize"  # validation accuracy (fixed; classification tasks)
    latency: str = "minimize"  # median forward latency in ms (fixed)
    params: str | None = None  # "minimize" adds the parameter count as an objective
    bpb: str | None = None  # validation bits per byte (fixed "minimize"; language-model tasks)
    decode: str | None = None  # "minimize" adds decoding ms per token as an objective (language-model tasks)


@dataclass(frozen=True)
class TaskSpec:
    """The task and its training budget."""

    name: str  # digits | mnist | relations | text | path to a .npz file | module:function | file.py:function
    options: dict[str, Any] = field(
        default_factory=dict
    )  # keyword arguments for explorer.engine.tasks.load_task
    epochs: int = 10  # planned epochs per trial (early stopping may run fewer)
    batch_size: int = 64  # training batch size

    @property
    def kind(self) -> str:
        """classification | language_model: what the task's targets are (and so how it is scored)."""
        return TASK_KINDS.get(self.name, "classification")


@dataclass(frozen=True)
class ModelSpec:
    """Which model realises each layout: explorer's own (the default), the user's function, or a transformers
    architecture built from its config class."""

    build: str | None = None  # "module:function" or "file.py:function" (explorer.engine.usermodel)
    hf: str | None = None  # a transformers model type (explorer.engine.hf_families)
    config: dict[str, Any] = field(default_factory=dict)  # the transformers config, all but the heads

    def builder(self) -> Any:
        """The model builder (:class:`explorer.engine.usermodel.ModelBuilder` for ``build``,
        :class:`explorer.engine.hfmodel.HFBuilder` for ``hf``), or None for explorer's own (imports torch)."""
        if self.hf is not None:
            from explorer.engine.hfmodel import HFBuilder

            return HFBuilder.of(self.hf, self.config)
        if self.build is None:
            return None
        from explorer.engine.usermodel import ModelBuilder

        return ModelBuilder(self.build)


@dataclass(frozen=True)
class BudgetsSpec:
    """Hard limits; each one set becomes an Optuna constraint (trials over it are infeasible)."""

    max_latency_ms: float | None = None
    max_params: int | None = None
    max_decode_ms: float | None = None  # decoding ms per token (language-model tasks)
    max_kv_cache_mb: float | None = None  # key/value cache at [decode] context and batch, MB of 10^6 bytes


def read_objectives(data: Any, task: TaskSpec) -> ObjectivesSpec:
    t = Table(data, "[objectives]", SPEC_KEYS["objectives"])
    lm = task.kind == "language_model"
    own, other = ("bpb", "accuracy") if lm else ("accuracy", "bpb")
    if other in t.data:
        metric = quality_metric(task.kind)
        raise SpecError(
            f"{other!r} in [objectives] does not fit task {task.name!r}, which is scored by {metric.label} "
            f'({metric.direction}d); write {own} = "{metric.direction}" or leave it out.'
        )
    t.text("accuracy", "maximize", choices=("maximize",))
    t.text("bpb", "minimize", choices=("minimize",))
    t.text("latency", "minimize", choices=("minimize",))
    decode = t.text("decode", None, choices=("minimize",))
    if decode and not lm:
        raise SpecError(
            f"'decode' in [objectives] needs a language-model task (text); {task.name!r} classifies. Remove it."
        )
    return ObjectivesSpec(
        accuracy=None if lm else "maximize",
        bpb="minimize" if lm else None,
        params=t.text("params", None, choices=("minimize",)),
        decode=decode,
    )


def read_task(data: Any) -> TaskSpec:
    t = Table(data, "[task]", SPEC_KEYS["task"])
    name = t.text("name")
    if name not in TASK_NAMES and not name.endswith(".npz") and not is_reference(name):
        raise SpecError(
            f"'name' in [task] is {name!r}; choose {', '.join(TASK_NAMES)}, give a path ending in .npz, or "
            f"name your own function as {REFERENCE_FORM}."
        )
    options = t.get("options", {}, lambda v: isinstance(v, dict), "a table such as { n_relations = 4 }")
    for key, value in options.items():
        scalar = lambda v: isinstance(v, (str, int, float, bool))  # noqa: E731 (not TOML dates or tables)
        if not (scalar(value) or value == [] or is_list(value, scalar)):
            raise SpecError(
                f"task option {key!r} in [task] is {kind(value)}; task options must be strings, numbers, "
                "booleans or lists of them."
            )
    return TaskSpec(
        name=name,
        options=dict(options),
        epochs=t.integer("epochs", 10),
        batch_size=t.integer("batch_size", 64),
    )


def read_decode(data: Any, task: TaskSpec, wanted: bool) -> DecodeConfig | None:
    """The [decode] table; a decoding objective or budget without one measures at the defaults."""
    if data is None and not wanted:
        return None
    t = Table({} if data is None else data, "[decode]", SPEC_KEYS["decode"])
    if task.kind != "language_model":
        what = "[decode]" if data is not None else "a decoding objective or budget"
        raise SpecError(
            f"{what} needs a language-model task (text); {task.name!r} classifies: remove it or use task text."
        )
    return DecodeConfig(context=t.integer("context", 512), batch_size=t.integer("batch_size", 1))


def read_budgets(data: Any, task: TaskSpec) -> BudgetsSpec:
    t = Table(data, "[budgets]", SPEC_KEYS["budgets"])
    budgets = BudgetsSpec(
        max_latency_ms=t.positive("max_latency_ms", None),
        max_params=t.integer("max_params", None),
        max_decode_ms=t.positive("max_decode_ms", None),
        max_kv_cache_mb=t.positive("max_kv_cache_mb", None),
    )
    for key in ("max_decode_ms", "max_kv_cache_mb"):
        if getattr(budgets, key) is not None and task.kind != "language_model":
            raise SpecError(
                f"{key!r} in [budgets] needs a language-model task (text); {task.name!r} classifies. Remove it."
            )
    return budgets


def read_model(data: Any, task: TaskSpec, decode: DecodeConfig | None) -> ModelSpec:
    """The [model] table: ``build``, the user's model function (checked for its form here, imported later), or
    ``hf`` with its ``config`` (checked against the space by :mod:`explorer.search.hf_spec`)."""
    t = Table(data, "[model]", SPEC_KEYS["model"])
    build = t.text("build", None)
    hf = t.text("hf", None)
    config = t.get("config", {}, lambda v: isinstance(v, dict), 'a table such as { hidden_act = "gelu" }')
    if hf is not None:
        if build is not None:
            raise SpecError(
                "[model] has both build and hf; keep one: your function, or a transformers model."
            )
        return ModelSpec(hf=hf, config=dict(config))  # checked against the space by explorer.search.hf_spec
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
