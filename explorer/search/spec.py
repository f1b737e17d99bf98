"""Study specs: a strict TOML format describing one study, parsed into frozen dataclasses.

A spec is checked completely before anything runs: an unknown key at any level, a wrong type, a missing
required key, or a space that is empty or impossible under the head rules is a :class:`SpecError` naming the
key, its table and the fix. :meth:`StudySpec.to_dict` is JSON-ready and canonical (sorted lists, defaults filled
in); it is stored in the study's user attrs so ``explorer study resume NAME`` works from the database alone,
and ``spec_from_dict(spec.to_dict()) == spec``.

Every key, its table, type and default is documented once, in ``docs/spec.md``; the readers accept exactly the
keys of :data:`explorer.search.spec_keys.SPEC_KEYS`, and ``tests/test_docs.py`` checks that the two agree.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from explorer.engine.config import (
    ATTENTION_IMPLS,
    LATENCY_DTYPES,
    LATENCY_RUNTIMES,
    DecodeConfig,
    LatencyConfig,
)
from explorer.engine.limits import check_file_size
from explorer.engine.measures import QualityMetric, quality_metric
from explorer.engine.schedules import SCHEDULE_FAMILIES
from explorer.errors import ConfigError, ExplorerError, SpecError
from explorer.search.evidence_spec import AnswerSpec, FinalistsSpec, read_answer, read_finalists
from explorer.search.feasibility import SpaceSpec, check_space, realisable_families
from explorer.search.fidelity import EarlyStoppingSpec
from explorer.search.goals import (
    MB,
    TASK_KINDS,
    TASK_NAMES,
    BudgetsSpec,
    ModelSpec,
    ObjectivesSpec,
    TaskSpec,
    read_budgets,
    read_decode,
    read_model,
    read_objectives,
    read_task,
)
from explorer.search.hf_spec import check_hf, space_defaults
from explorer.search.overrides import apply_overrides, key_sources, parse_override
from explorer.search.spec_keys import SPEC_KEYS
from explorer.search.spec_limits import check_layouts, check_raw
from explorer.search.storage import check_artifact_location, check_study_name, mask_url
from explorer.search.toml_table import Table, is_list, is_number
from explorer.search.tracking_spec import TrackingSpec, read_tracking

__all__ = [
    "MB",
    "AnswerSpec",
    "SAMPLERS",
    "TASK_KINDS",
    "TASK_NAMES",
    "BudgetsSpec",
    "EarlyStoppingSpec",
    "FinalistsSpec",
    "ModelSpec",
    "ObjectivesSpec",
    "SpaceSpec",
    "StudySpec",
    "TaskSpec",
    "load_spec",
    "spec_from_dict",
]

SAMPLERS = ("tpe", "nsga2", "gp", "random", "qmc")
DEVICES = ("auto", "cpu", "cuda")
TOP_KEYS = SPEC_KEYS[""]


@dataclass(frozen=True)
class StudySpec:
    """One study: what to search, on which task, how to measure it and where to store it."""

    name: str
    n_trials: int
    task: TaskSpec
    space: SpaceSpec
    model: ModelSpec = ModelSpec()  # explorer's own model, or the user's [model] build
    objectives: ObjectivesSpec = ObjectivesSpec()
    latency: LatencyConfig = LatencyConfig()
    budgets: BudgetsSpec = BudgetsSpec()
    early_stopping: EarlyStoppingSpec = EarlyStoppingSpec()
    finalists: FinalistsSpec = FinalistsSpec()
    answer: AnswerSpec = AnswerSpec()
    decode: DecodeConfig | None = None  # where decoding latency is measured; None: not measured
    storage: str | None = None  # None: sqlite:///studies/<name>.db (search.storage.default_storage_url)
    timeout: float | None = None
    sampler: str = "tpe"
    seed: int = 0
    bench: bool = True  # the attention benchmark, once per study (the "merged heads are faster" rule)
    tracking: TrackingSpec = TrackingSpec()  # where the study is also logged (MLflow); not its meaning
    artifacts: str | None = (
        None  # artifact location (weights, figures); None: $EXPLORER_ARTIFACTS or the default
    )
    # (dotted key, "file" | "override") for each key its document set (explorer.search.overrides); not stored
    # in the spec, not compared: where a value came from is not what it means
    origin: tuple[tuple[str, str], ...] = dataclasses.field(default=(), compare=False, repr=False)

    @property
    def metric(self) -> QualityMetric:
        """How the task is scored: validation accuracy (maximized) or bits per byte (minimized)."""
        return quality_metric(self.task.kind)

    def objective_names(self) -> list[str]:
        """The objectives in the order of a trial's values."""
        quality = "accuracy" if self.metric.name == "val_accuracy" else "bpb"
        extra = (["params"] if self.objectives.params else []) + (
            ["decode"] if self.objectives.decode else []
        )
        return [quality, "latency", *extra]

    def directions(self) -> list[str]:
        """Optuna directions, one per objective (the quality's from the task kind, every other minimized)."""
        return [self.metric.direction] + ["minimize"] * (len(self.objective_names()) - 1)

    def to_dict(self) -> dict[str, Any]:
        """A canonical, JSON-ready dict that :func:`spec_from_dict` reads back into an equal spec."""
        d = _plain(dataclasses.asdict(self))
        d.pop("origin", None)
        return d

    def stored(self) -> dict[str, Any]:
        """What is stored with the study: :meth:`to_dict` without ``storage`` (a URL may hold a password, and
        where the study lives is not part of what it means)."""
        d = self.to_dict()
        d.pop("storage", None)
        return d


def _plain(value: Any) -> Any:
    """Tuples to lists and unset (None) keys dropped, recursively, so that the dict survives JSON."""
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items() if v is not None}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    return value


# --------------------------------------------------------------------------------------------- reading


def _space(data: Any) -> SpaceSpec:
    t = Table(data, "[space]", SPEC_KEYS["space"])
    names = f"a non-empty list of names from {', '.join(SCHEDULE_FAMILIES)}"
    families = t.get("families", SCHEDULE_FAMILIES, lambda v: is_list(v, lambda x: isinstance(x, str)), names)
    for f in families:
        if f not in SCHEDULE_FAMILIES:
            raise SpecError(
                f"family {f!r} in [space] is unknown; choose from {', '.join(SCHEDULE_FAMILIES)}."
            )
    t.distinct("families", list(families))
    lr = t.raw("lr", 3e-3)
    if isinstance(lr, list):
        if len(lr) != 2 or not is_list(lr, is_number):
            raise t.fail("lr", "a number or a [low, high] pair of numbers", lr)
        if not 0 < lr[0] < lr[1]:
            raise SpecError(
                f"'lr' in [space] is {lr!r}; a searched range needs 0 < low < high, e.g. [1e-4, 1e-2]."
            )
        lr = (float(lr[0]), float(lr[1]))
    else:
        lr = t.positive("lr", 3e-3)
    space = SpaceSpec(
        d_model=t.integers("d_model"),
        n_layers=t.integers("n_layers"),
        heads=t.integers("heads"),
        min_dk=t.integers("min_dk", (1,), scalar_ok=True),
        families=tuple(f for f in SCHEDULE_FAMILIES if f in families),
        mlp_ratio=t.numbers("mlp_ratio", (4.0,)),
        lr=lr,
        dropout=t.number("dropout", 0.0, high=1.0),
        attention=t.text("attention", "fused", choices=ATTENTION_IMPLS),
        kv_heads=t.integers("kv_heads", None),
        kv_per_layer=t.flag("kv_per_layer", False),
        head_dim=t.integers("head_dim", None, scalar_ok=True),
    )
    if "families" not in data:  # default: every family this space can realise (free needs 3+ layers...)
        space = dataclasses.replace(space, families=realisable_families(space) or SCHEDULE_FAMILIES)
    return space


def _latency(data: Any) -> LatencyConfig:
    t = Table(data, "[latency]", SPEC_KEYS["latency"])
    device = t.text("device", "auto", choices=DEVICES)
    dtype = t.text("dtype", "float32", choices=LATENCY_DTYPES)
    runtime = t.text("runtime", "eager", choices=LATENCY_RUNTIMES)
    if device == "cpu" and dtype != "float32":
        raise SpecError(
            f'[latency] times {dtype} on the cpu; half types need device = "cuda" (or use float32).'
        )
    if runtime == "onnxruntime" and dtype != "float32":
        raise SpecError('[latency] runtime = "onnxruntime" times float32 models; set dtype = "float32".')
    try:
        return LatencyConfig(
            device=device,
            batch_size=t.integer("batch_size", 32),
            threads=t.integer("threads", 1),
            dtype=dtype,
            min_run_time=t.positive("min_run_time", 0.3),
            runtime=runtime,
            seq_len=t.integer("seq_len", None),
        )
    except ConfigError as exc:
        raise SpecError(f"[latency]: {exc}") from None


def _early_stopping(data: Any, epochs: int) -> EarlyStoppingSpec:
    t = Table(data, "[early_stopping]", SPEC_KEYS["early_stopping"])
    spec = EarlyStoppingSpec(
        enabled=t.flag("enabled", True),
        min_epochs=t.integer("min_epochs", 3),
        reduction=t.integer("reduction", 2, low=2),
        alpha=t.number("alpha", 0.05, low=1e-6, high=1.0),
    )
    # The default just has no rungs; so does a stored spec (it lists every default) read back to resume it.
    chosen = "min_epochs" in t.data and spec.min_epochs != EarlyStoppingSpec.min_epochs
    if spec.enabled and spec.min_epochs >= epochs and chosen:
        raise SpecError(
            f"'min_epochs' in [early_stopping] is {spec.min_epochs} but [task] trains only {epochs} epochs, so no "
            "trial could ever stop early; lower min_epochs or set enabled = false."
        )
    return spec


def _artifacts(location: str | None) -> str | None:
    if location is None:
        return None
    try:  # the form only: a machine reading a stored spec need not have the store's client installed
        return check_artifact_location(location, importable=False)
    except ExplorerError as exc:
        raise SpecError(f"'artifacts' at the top level: {exc}") from None


def spec_from_dict(data: Mapping[str, Any], *, stored: bool = False) -> StudySpec:
    """Build and fully check a spec from a parsed TOML document, or (``stored``) from the
    :meth:`StudySpec.stored` dict of a study, possibly written by an older explorer.

    Sizes are checked against explorer.engine.limits first, and the space's architectures counted, unless the
    spec is ``stored`` (read back from a study, accepted when it was created).
    """
    if not stored:
        check_raw(data)
    t = Table(dict(data) if isinstance(data, Mapping) else data, "the top level", TOP_KEYS)
    name = check_study_name(t.text("name"))
    task = read_task(t.raw("task"))
    timeout = t.positive("timeout", None)
    objectives = read_objectives(t.raw("objectives", {}), task)
    budgets = read_budgets(t.raw("budgets", {}), task)
    wanted = bool(objectives.decode or budgets.max_decode_ms or budgets.max_kv_cache_mb)
    decode = read_decode(t.raw("decode", None), task, wanted)
    model = read_model(t.raw("model", {}), task, decode)
    spec = StudySpec(
        name=name,
        n_trials=t.integer("n_trials"),
        task=task,
        space=_space(space_defaults(model, t.raw("space"))),
        model=model,
        objectives=objectives,
        latency=_latency(t.raw("latency", {})),
        decode=decode,
        budgets=budgets,
        early_stopping=_early_stopping(t.raw("early_stopping", {}), task.epochs),
        finalists=read_finalists(t.raw("finalists", {}), task, stored=stored),
        answer=read_answer(t.raw("answer", {}), task, stored=stored),
        storage=t.text("storage", None),
        artifacts=_artifacts(t.text("artifacts", None)),
        timeout=timeout,
        sampler=t.text("sampler", "tpe", choices=SAMPLERS),
        seed=t.integer("seed", 0, low=0),
        bench=t.flag("bench", True),
        tracking=read_tracking(t.raw("tracking", {})),
    )
    check_hf(spec.model, spec.space, task, spec.latency)  # what a transformers class cannot hold, before the space
    check_space(spec.space)  # an empty or impossible space is a spec error, found here
    if not stored:
        check_layouts(spec.space)
    return spec


def load_spec(path: str | Path, overrides: Sequence[str] = ()) -> StudySpec:
    """Read and check a TOML study spec, with ``overrides`` (``TABLE.KEY=VALUE``, :mod:`explorer.search.overrides`)
    written into it first so they are checked exactly as the file is; any problem is one :class:`SpecError`
    sentence. The spec's ``origin`` says which keys the file set and which an override did."""
    parsed = [parse_override(text) for text in overrides]
    data = read_spec_file(path)
    try:
        spec = spec_from_dict(apply_overrides(data, parsed))
    except SpecError as exc:
        named = [o for o in parsed if any(f"{o.path[-1]!r} {w} " in str(exc) for w in ("in", "at"))]
        raise SpecError(mask_url(f"--set {named[-1].text}: {exc}" if named else str(exc))) from None
    return dataclasses.replace(spec, origin=tuple(sorted(key_sources(data, parsed).items())))


def read_spec_file(path: str | Path) -> dict[str, Any]:
    """The parsed TOML document of a spec file, not yet checked; an unreadable file is one SpecError line."""
    try:
        import tomllib
    except ImportError:  # Python 3.10
        try:
            import tomli as tomllib  # type: ignore[no-redef]
        except ImportError:
            raise SpecError(
                "reading TOML specs on Python 3.10 needs tomli; `pip install tomli` or use 3.11+."
            ) from None
    path = Path(path)
    check_file_size(path, "spec")  # read whole: a spec of gigabytes (or /dev/zero) is refused unread
    try:
        # utf-8-sig: a byte-order mark some editors write is not part of the TOML
        data = tomllib.loads(path.read_text(encoding="utf-8-sig"))
    except FileNotFoundError:
        raise SpecError(f"no spec file {str(path)!r}; check the path (specs live under studies/).") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise SpecError(
            f"cannot read spec {str(path)!r} ({exc.__class__.__name__}); give a readable UTF-8 TOML file."
        ) from None
    except tomllib.TOMLDecodeError as exc:
        raise SpecError(f"{path} is not valid TOML: {exc}; fix the syntax there.") from None
    except RecursionError:
        raise SpecError(
            f"{path} nests tables or arrays too deeply to read; a spec needs two levels."
        ) from None
    return data
