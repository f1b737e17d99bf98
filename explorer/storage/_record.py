"""The trial record: what one trial measured, written by the objective and read back by everything else.

:class:`TrialRecord` is the one shape a trial has outside Optuna, and its schema: each field declares how it is
kept in a trial (an :class:`_Attr` in its metadata): under which user attributes, how it is written there and
read back, or that Optuna keeps it in its own columns (number, state, times). :data:`STORED_KEYS`, the writer
(:func:`write`, :meth:`TrialRecord.to_attrs`) and the reader (:func:`record_from_trial`) all read those
declarations, so a field added to the record is one edit. The attributes are plain JSON values with readable
names, so optuna-dashboard shows ``heads = [4, 2]`` rather than an encoded position; :func:`load_records` reads a
whole study, and the few readers of one attribute of a running or queued trial (:func:`role_of`,
:func:`finalist_run`...) live here too. Analysis, the report, plots, export and confirmation read records, never
raw attributes. Inside a record everything is typed (tuples, numbers, a
:class:`~explorer.layout._config.ModelConfig`); strings like "4,2" exist only at the CSV, TOML, JSON and
command-line edges.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import optuna
from optuna.trial import FrozenTrial, TrialState

from explorer.layout import FinalistRun, ModelConfig, Purpose, TrainConfig
from explorer.measurements import DecodeResult, LatencyResult, QualityMetric, quality_metric
from explorer.storage import _optuna_private as optuna_private
from explorer.storage._companion import study_parts, trials_of
from explorer.storage._trial_kinds import Closure, Proposal, Role, TimingKind

RECORD_VERSION = 4  # 3: kv_heads, head_dim, the task kind, bits per byte, decoding; 4: folds, chance level
ROLES = tuple(Role)
RETIMED_ATTR = "retimed"  # study attribute holding the finalists' re-timings (explorer.study._retime)
_FINALIST = "finalist"  # the attribute a queued finalist run carries (FinalistRun.attrs)
_SCHEMA = "stored"  # the metadata entry of a TrialRecord field: its _Attr
# A trial that ran to its end or was stopped early (pruned): done, as a stage's total and progress count it.
DONE_STATES = (TrialState.COMPLETE, TrialState.PRUNED)


def arch_key(config: ModelConfig, lr: float) -> str:
    """What makes two trials the same configuration: the architecture and its learning rate."""
    return f"{config.key()}_lr{lr:.6g}"


# ---------------------------------------------------------------------------------------- how fields are kept


class _Attr:
    """How a field of :class:`TrialRecord` is kept in a trial. This one: under the field's own name, as its plain
    JSON value (not written when None), read back by ``kind``; nothing stored reads as ``default``, else the
    field's own default. The subclasses below keep the fields that are not one plain value.

    ``start``: what the trial is, written when it starts (:meth:`TrialRecord.arch_attrs`); ``retry``: inherited
    by the trial that retries it (:data:`RETRY_ATTRS`); ``nulls``: written even when None, as the start always
    wrote it; ``sparse``: not written at its default (a classification task writes no ``task_kind``).
    """

    def __init__(
        self,
        kind: Callable[[Any], Any] = str,
        *,
        default: Any = None,
        start: bool = False,
        retry: bool = False,
        nulls: bool = False,
        sparse: bool = False,
    ):
        self.kind, self.default = kind, default
        self.start, self.retry, self.nulls, self.sparse = start, retry, nulls, sparse

    def keys(self, f: dataclasses.Field[Any]) -> tuple[str, ...]:
        """The user attributes the field is written as (none: Optuna keeps it)."""
        return (f.name,)

    def put(self, f: dataclasses.Field[Any], fields: Mapping[str, Any]) -> dict[str, Any]:
        """The attributes that hold ``fields[f.name]`` (``fields``: the values written with it, by name)."""
        value = fields[f.name]
        if (value is None and not self.nulls) or (self.sparse and value == self.default_of(f)):
            return {}
        return {f.name: value}

    def get(self, f: dataclasses.Field[Any], a: Mapping[str, Any], t: FrozenTrial | None) -> Any:
        """The field's value from a trial's user attributes ``a`` (``t``: the trial, for what Optuna keeps)."""
        value = a.get(f.name)
        return self.default_of(f) if value is None else self.kind(value)

    def default_of(self, f: dataclasses.Field[Any]) -> Any:
        """What the field reads as where nothing is stored."""
        if self.default is not None or f.default is dataclasses.MISSING:
            return self.default
        return f.default


class _Optuna(_Attr):
    """A field Optuna keeps in its own columns (the trial's number, state and times): no user attribute."""

    def __init__(self, read: Callable[[FrozenTrial], Any]):
        super().__init__()
        self.read = read

    def keys(self, f: dataclasses.Field[Any]) -> tuple[str, ...]:
        return ()

    def put(self, f: dataclasses.Field[Any], fields: Mapping[str, Any]) -> dict[str, Any]:
        return {}

    def get(self, f: dataclasses.Field[Any], a: Mapping[str, Any], t: FrozenTrial | None) -> Any:
        assert t is not None, f"{f.name} is read from the trial itself"
        return self.read(t)


class _Config(_Attr):
    """The architecture, one readable attribute per part, with the version of the record's format (written
    first, with the architecture). ``dropout`` is only read: records before version 3 held it."""

    KEYS: tuple[str, ...] = ("record_version", "d_model", "n_layers", "heads", "kv_heads", "head_dim", "d_k")
    KEYS += ("family", "min_dk", "mlp_ratio", "dropout", "attention")

    def keys(self, f: dataclasses.Field[Any]) -> tuple[str, ...]:
        return self.KEYS

    def put(self, f: dataclasses.Field[Any], fields: Mapping[str, Any]) -> dict[str, Any]:
        c = fields[f.name]
        if c is None:
            return {}
        return {
            "record_version": RECORD_VERSION,
            "d_model": c.d_model,
            "n_layers": c.n_layers,
            "heads": list(c.heads),
            "kv_heads": list(c.kv_per_layer),  # equal to heads: ordinary multi-head attention
            **({} if c.head_dim is None else {"head_dim": list(c.head_dim)}),
            "d_k": list(c.d_k),
            "family": c.family,
            "min_dk": c.min_dk,
            "mlp_ratio": c.mlp_ratio,
            "attention": c.attention,
        }

    def get(self, f: dataclasses.Field[Any], a: Mapping[str, Any], t: FrozenTrial | None) -> Any:
        if "heads" not in a or "d_model" not in a:
            return None
        kv, head_dim = a.get("kv_heads"), a.get("head_dim")  # absent in records before version 3
        return ModelConfig(
            d_model=int(a["d_model"]),
            heads=tuple(int(h) for h in a["heads"]),
            min_dk=int(a.get("min_dk", 1)),
            mlp_ratio=float(a.get("mlp_ratio", 4.0)),
            dropout=float(a.get("dropout", 0.0)),
            attention=str(a.get("attention", "fused")),
            kv_heads=None if kv is None else tuple(int(k) for k in kv),
            head_dim=None if head_dim is None else tuple(int(d) for d in head_dim),
        )


class _Planned(_Attr):
    """The epochs a trial plans: written when it starts, or (a queued finalist run) the horizon it carries."""

    def get(self, f: dataclasses.Field[Any], a: Mapping[str, Any], t: FrozenTrial | None) -> Any:
        value = a.get(f.name)
        if value is None and isinstance(a.get(_FINALIST), Mapping):
            value = a[_FINALIST].get("epochs")
        return None if value is None else self.kind(value)


class _Floats(_Attr):
    """A tuple of numbers, stored as a list (written even when empty)."""

    def put(self, f: dataclasses.Field[Any], fields: Mapping[str, Any]) -> dict[str, Any]:
        return {f.name: [*fields[f.name]]}

    def get(self, f: dataclasses.Field[Any], a: Mapping[str, Any], t: FrozenTrial | None) -> Any:
        return tuple(float(x) for x in a.get(f.name) or ())


class _Measured(_Attr):
    """A measurement stored as its ``to_dict``, and beside it the figures optuna-dashboard should show
    (``shown``: attribute name -> the figure), which are only written: the record derives them again."""

    def __init__(self, result: type[LatencyResult] | type[DecodeResult], **shown: Callable[[Any], Any]):
        super().__init__()
        self.result, self.shown = result, shown

    def keys(self, f: dataclasses.Field[Any]) -> tuple[str, ...]:
        return (f.name, *self.shown)

    def put(self, f: dataclasses.Field[Any], fields: Mapping[str, Any]) -> dict[str, Any]:
        value = fields[f.name]
        if value is None:
            return {}
        return {f.name: value.to_dict(), **{name: figure(value) for name, figure in self.shown.items()}}

    def get(self, f: dataclasses.Field[Any], a: Mapping[str, Any], t: FrozenTrial | None) -> Any:
        value = a.get(f.name)
        return self.result.from_dict(dict(value)) if isinstance(value, Mapping) else None


class _Constraints(_Attr):
    """The budgets, (name, value) with <= 0 feasible: Optuna keeps them (explorer sets them on the trial); they
    are written again, with whether all are met, because optuna-dashboard 0.21 does not show Optuna 5.0's."""

    def keys(self, f: dataclasses.Field[Any]) -> tuple[str, ...]:
        return (f.name, "feasible")

    def put(self, f: dataclasses.Field[Any], fields: Mapping[str, Any]) -> dict[str, Any]:
        pairs = tuple(fields[f.name])
        if not pairs:
            return {}
        return {f.name: dict(pairs), "feasible": not any(v > 0 for _, v in pairs)}

    def get(self, f: dataclasses.Field[Any], a: Mapping[str, Any], t: FrozenTrial | None) -> Any:
        return _tuple_pairs(None if t is None else t.constraints) or _tuple_pairs(a.get(f.name))


class _Relations(_Attr):
    """(layer, head, relation, attention) rows, stored as lists (not written when there are none)."""

    def put(self, f: dataclasses.Field[Any], fields: Mapping[str, Any]) -> dict[str, Any]:
        rows = [list(r) for r in fields[f.name]]
        return {f.name: rows} if rows else {}

    def get(self, f: dataclasses.Field[Any], a: Mapping[str, Any], t: FrozenTrial | None) -> Any:
        rows = a.get(f.name) or ()
        return tuple((int(r[0]), int(r[1]), int(r[2]), float(r[3])) for r in rows if len(r) == 4)


class _FinalistPart(_Attr):
    """A part of the finalist run a trial was queued with (the label, the purpose): kept in its ``finalist``
    attribute, which the label writes whole, as a queued run carries it (:meth:`FinalistRun.attrs`; the seed is
    the trial's own attribute). A run queued before horizons were chosen is a grid run."""

    def keys(self, f: dataclasses.Field[Any]) -> tuple[str, ...]:
        return (_FINALIST,)

    def put(self, f: dataclasses.Field[Any], fields: Mapping[str, Any]) -> dict[str, Any]:
        label, config, lr = fields.get("label"), fields.get("config"), fields.get("lr")
        if f.name != "label" or label is None or config is None or lr is None:
            return {}  # the purpose is written with the label
        purpose, epochs = fields.get("purpose"), fields.get("epochs_planned")
        horizon = {} if purpose is None else {"epochs": epochs, "purpose": purpose}
        return {_FINALIST: FinalistRun(config, lr, fields.get("seed") or 0, label, **horizon).attrs()}

    def get(self, f: dataclasses.Field[Any], a: Mapping[str, Any], t: FrozenTrial | None) -> Any:
        run = a.get(_FINALIST)
        if not isinstance(run, Mapping):
            return None
        if f.name == "label":
            return None if run.get("label") is None else str(run["label"])
        return Purpose(run.get("purpose", Purpose.GRID))


class _Closed(_Attr):
    """Why a trial was closed without running: the attribute named by its :class:`Closure`, which holds a
    detail (True, or the trial that owns its configuration)."""

    def keys(self, f: dataclasses.Field[Any]) -> tuple[str, ...]:
        return tuple(c.value for c in Closure)

    def put(self, f: dataclasses.Field[Any], fields: Mapping[str, Any]) -> dict[str, Any]:
        closed = fields[f.name]
        return {} if closed is None else {Closure(closed).value: True}

    def get(self, f: dataclasses.Field[Any], a: Mapping[str, Any], t: FrozenTrial | None) -> Any:
        return next((c for c in Closure if c.value in a), None)


def _kept(attr: _Attr, default: Any = dataclasses.MISSING) -> Any:
    """A TrialRecord field kept as ``attr`` says (``default``; none: required)."""
    return dataclasses.field(default=default, metadata={_SCHEMA: attr})


_INT, _FLOAT, _STR = _Attr(int), _Attr(float), _Attr(str)
_START_INT, _START_FLOAT = _Attr(int, start=True), _Attr(float, start=True)


def _tuple_pairs(value: Any) -> tuple[tuple[str, float], ...]:
    if isinstance(value, Mapping):
        return tuple(sorted((str(k), float(v)) for k, v in value.items()))
    return ()


# ---------------------------------------------------------------------------------------- the record


@dataclass(frozen=True)
class TrialRecord:
    """One trial of a study, typed. Fields a trial had not reached (a failure, a pruned trial) are None."""

    number: int = _kept(_Optuna(lambda t: t.number))
    state: TrialState = _kept(_Optuna(lambda t: t.state))  # Optuna's, as the trial has it
    role: Role = _kept(_Attr(Role, default=Role.SEARCH, start=True, retry=True))  # search: from before roles
    # the architecture (None only if the trial failed before sampling)
    config: ModelConfig | None = _kept(_Config(start=True))
    lr: float | None = _kept(_Attr(float, start=True, nulls=True))
    # the training seed (init, data order, dropout)
    seed: int | None = _kept(_Attr(int, start=True, nulls=True, retry=True))
    epochs_planned: int | None = _kept(_Planned(int, start=True, nulls=True))
    batch_size: int | None = _kept(_Attr(int, start=True, nulls=True), None)  # training batch size
    # the lr schedule (plateau: finalists of studies before the fixed schedule)
    schedule: str = _kept(_Attr(str, start=True), "cosine")
    patience: int | None = _kept(_Attr(int, start=True, nulls=True), None)
    # The task's validation metric after each epoch run: accuracy, or bits per byte for a language model.
    history: tuple[float, ...] = _kept(_Floats(), ())
    val_accuracy: float | None = _kept(_FLOAT, None)  # after the last epoch run (a language model: next-byte)
    test_accuracy: float | None = _kept(_FLOAT, None)
    val_size: int | None = _kept(_INT, None)  # validation targets: accuracies are proportions of this many
    latency: LatencyResult | None = _kept(_Measured(LatencyResult, latency_ms=lambda r: r.median_ms), None)
    params: int | None = _kept(_INT, None)
    flops: int | None = _kept(_INT, None)
    device: str | None = _kept(_STR, None)
    torch_version: str | None = _kept(_STR, None)
    train_time_s: float | None = _kept(_FLOAT, None)
    samples_per_s: float | None = _kept(_FLOAT, None)
    # why training ended before its plan (a rung; a plateau, in older studies)
    stop: str | None = _kept(_STR, None)
    fail_reason: str | None = _kept(_STR, None)
    retry_of: int | None = _kept(_INT, None)  # the killed or interrupted trial this one retries
    constraints: tuple[tuple[str, float], ...] = _kept(_Constraints(), ())  # (name, value); <= 0 is feasible
    proposal: Proposal | None = _kept(_Attr(Proposal), None)  # how the search chose it
    # a finalist's part in the plan: knee, front, 1 head, 8 heads, next faster
    label: str | None = _kept(_FinalistPart(retry=True), None)
    # a finalist run's: the grid, the horizon's pilot, or the horizon check
    purpose: Purpose | None = _kept(_FinalistPart(retry=True), None)
    # proposals for already-evaluated architectures the search skipped before this one
    rejected: int = _kept(_INT, 0)
    # (layer, head, relation, attention), relations task
    relations: tuple[tuple[int, int, int, float], ...] = _kept(_Relations(), ())
    started: dt.datetime | None = _kept(_Optuna(lambda t: t.datetime_start), None)
    completed: dt.datetime | None = _kept(_Optuna(lambda t: t.datetime_complete), None)
    # classification | language_model: which metric is the quality
    task_kind: str = _kept(_Attr(str, start=True, sparse=True), "classification")
    # validation bits per byte after the last epoch (language-model tasks)
    val_bpb: float | None = _kept(_FLOAT, None)
    test_bpb: float | None = _kept(_FLOAT, None)
    val_bpb_se: float | None = _kept(_FLOAT, None)  # standard error of val_bpb over the validation windows
    # decoding latency and key/value cache, when the study measures it
    decode: DecodeResult | None = _kept(
        _Measured(
            DecodeResult, decode_ms=lambda d: d.ms_per_token, kv_cache_bytes=lambda d: d.kv_cache_bytes
        ),
        None,
    )
    # the cross-validation fold it validated on (None: the task's fixed split)
    fold: int | None = _kept(_START_INT, None)
    folds: int | None = _kept(_START_INT, None)  # how many folds its replicate was cut into
    fold_seed: int | None = _kept(_START_INT, None)  # the seed that cut its replicate's folds
    # what learning nothing scores on its validation split (explorer.data._folds.chance_level)
    chance: float | None = _kept(_START_FLOAT, None)
    # why it was closed without running (None: it ran, or runs)
    closed: Closure | None = _kept(_Closed(), None)
    epoch: int | None = _kept(_INT, None)  # the last epoch it finished (progress while it runs)
    # a finished finalist run: its curve had flattened (answer._horizon)
    plateaued: bool | None = _kept(_Attr(bool), None)

    # ---------------------------------------------------------------------------------------- derived

    @property
    def key(self) -> str | None:
        """The configuration's identity (architecture and learning rate)."""
        return None if self.config is None or self.lr is None else arch_key(self.config, self.lr)

    @property
    def heads(self) -> tuple[int, ...]:
        return self.config.heads if self.config is not None else ()

    @property
    def d_k(self) -> tuple[int, ...]:
        return self.config.d_k if self.config is not None else ()

    @property
    def family(self) -> str | None:
        return self.config.family if self.config is not None else None

    @property
    def metric(self) -> QualityMetric:
        """How this trial's task is scored (explorer.measurements.quality_metric of its task kind)."""
        return quality_metric(self.task_kind)

    @property
    def quality(self) -> float | None:
        """The validation value of :attr:`metric` (accuracy, or bits per byte); None if not reached."""
        return getattr(self, self.metric.name)

    @property
    def test_quality(self) -> float | None:
        return getattr(self, self.metric.test_name)

    @property
    def decode_ms(self) -> float | None:
        """Milliseconds per generated token with a key/value cache (None when not measured)."""
        return None if self.decode is None else self.decode.ms_per_token

    @property
    def epochs_run(self) -> int:
        return len(self.history)

    @property
    def feasible(self) -> bool:
        return all(v <= 0 for _, v in self.constraints)

    @property
    def latency_ms(self) -> float | None:
        return None if self.latency is None else self.latency.median_ms

    @property
    def finished(self) -> bool:
        """COMPLETE with its quality and latency measured."""
        return self.state is TrialState.COMPLETE and self.quality is not None and self.latency is not None

    @property
    def duration_s(self) -> float | None:
        if self.started is None or self.completed is None:
            return None
        return (self.completed - self.started).total_seconds()

    def train_config(self) -> TrainConfig:
        """How this trial trained (its planned epochs; :attr:`epochs_run` says where it stopped)."""
        if self.lr is None or self.seed is None or self.epochs_planned is None:
            raise ValueError(f"trial #{self.number} has no training settings recorded")
        config = TrainConfig(
            epochs=self.epochs_planned,
            batch_size=self.batch_size or 32,
            lr=self.lr,
            seed=self.seed,
            schedule=self.schedule,
        )
        return dataclasses.replace(config, patience=self.patience) if self.patience else config

    # ---------------------------------------------------------------------------------------- writing

    def start_fields(self) -> dict[str, Any]:
        """What the trial is, by field: what the objective writes when it starts (:meth:`arch_attrs`)."""
        return {f.name: getattr(self, f.name) for f in _FIELDS if _attr(f).start}

    def arch_attrs(self) -> dict[str, Any]:
        """The architecture, and what else the trial is, as the readable user attributes written first."""
        assert self.config is not None
        return _encode(self.start_fields())

    def to_attrs(self) -> dict[str, Any]:
        """Every field as the user attributes that hold it (what :func:`record_from_trial` reads back; the
        trial's number, state and times live in Optuna's own fields)."""
        return _encode({f.name: getattr(self, f.name) for f in _FIELDS if _attr(f).keys(f)})


_FIELDS = dataclasses.fields(TrialRecord)
_BY_NAME = {f.name: f for f in _FIELDS}


def _attr(f: dataclasses.Field[Any]) -> _Attr:
    """How the field ``f`` of TrialRecord is kept (every field declares it)."""
    assert _SCHEMA in f.metadata, f"TrialRecord.{f.name} does not declare how it is kept"
    return f.metadata[_SCHEMA]


# Every user attribute a trial may hold, as TrialRecord's fields declare them (the closures' marks included).
STORED_KEYS = frozenset(k for f in _FIELDS for k in _attr(f).keys(f))
# What a retried trial inherits: what it is, not what it measured (its role, seed and queued finalist run).
RETRY_ATTRS = tuple(dict.fromkeys(k for f in _FIELDS if _attr(f).retry for k in _attr(f).keys(f)))
_CLOSURES = _attr(_BY_NAME["closed"]).keys(_BY_NAME["closed"])  # written by write() with their detail


def _encode(fields: Mapping[str, Any]) -> dict[str, Any]:
    """``fields`` (TrialRecord's, by name) as the user attributes that hold them, each as its field declares; a
    name that is not a stored field is refused."""
    unknown = sorted(n for n in fields if n not in _BY_NAME or not _attr(_BY_NAME[n]).keys(_BY_NAME[n]))
    if unknown:
        raise ValueError(f"not a field of the trial record: {', '.join(unknown)}")
    attrs: dict[str, Any] = {}
    for f in _FIELDS:
        if f.name in fields:
            attrs |= _attr(f).put(f, fields)
    return attrs


def _read(a: Mapping[str, Any], name: str) -> Any:
    """The field ``name`` of TrialRecord, as it declares, from a trial's user attributes ``a``."""
    f = _BY_NAME[name]
    return _attr(f).get(f, a, None)


def record_from_trial(t: FrozenTrial) -> TrialRecord:
    """The record of one Optuna trial (any state): each field read back as it declares."""
    a = t.user_attrs
    return TrialRecord(**{f.name: _attr(f).get(f, a, t) for f in _FIELDS})


def closure_of(t: FrozenTrial) -> Closure | None:
    """Why a trial was closed without running (None: it ran, runs or waits)."""
    return _read(t.user_attrs, "closed")


def is_bookkeeping(t: FrozenTrial) -> bool:
    """A trial closed without running (beyond the total, or a configuration another trial already owns)."""
    return closure_of(t) is not None


def role_of(t: optuna.Trial | FrozenTrial) -> Role:
    """A trial's role (search when it has none: trials from before roles)."""
    return _read(t.user_attrs, "role")


def keeps_finalists_inside(study: optuna.Study) -> bool:
    """Whether a study holds finalist runs itself (made before they were kept apart): it keeps doing so."""
    return any(role_of(t) is Role.FINALIST for t in study.get_trials(deepcopy=False))


def finalist_attrs(run: FinalistRun) -> dict[str, Any]:
    """The user attributes of the trial queued to run ``run``: a finalist, its seed and the run
    (:func:`finalist_run` reads it back)."""
    return stored(role=Role.FINALIST, seed=run.seed, finalist=run.attrs())


def finalist_run(t: optuna.Trial | FrozenTrial) -> FinalistRun | None:
    """The finalist run a queued trial carries (None: not a finalist run; :func:`finalist_attrs` writes it)."""
    a = t.user_attrs
    if _FINALIST not in a:
        return None
    seed = _read(a, "seed")
    assert seed is not None, "a finalist run is queued with its seed"
    return FinalistRun.from_attrs(a[_FINALIST], seed)


def epochs_done(t: FrozenTrial) -> int:
    """How many epochs a trial has trained (while it runs: the last it reported)."""
    epoch = _read(t.user_attrs, "epoch")
    return len(_read(t.user_attrs, "history")) if epoch is None else epoch


def seed_of(t: optuna.Trial | FrozenTrial, default: int) -> int:
    """The training seed a trial was queued with (a retry, a finalist run), else ``default``."""
    seed = _read(t.user_attrs, "seed")
    return default if seed is None else seed


def proposal_of(study: optuna.Study, trial: optuna.Trial) -> Proposal | None:
    """How the search proposed a running trial, as stored now: the sampler notes it in the storage after the
    trial object cached its attributes (Optuna samples relative parameters lazily)."""
    return _read(optuna_private.stored_user_attrs(study, trial), "proposal")


def retry_attrs(t: optuna.Trial | FrozenTrial) -> dict[str, Any]:
    """The user attributes of the trial queued to retry ``t``: what it is (:data:`RETRY_ATTRS`), not what it
    measured, and which trial it retries."""
    return stored(**{k: t.user_attrs[k] for k in RETRY_ATTRS if k in t.user_attrs}, retry_of=t.number)


def stored(**attrs: Any) -> dict[str, Any]:
    """``attrs`` as a trial's user attributes (for ``enqueue_trial`` and ``create_trial``); a key that is not one
    of :data:`STORED_KEYS` is refused, so a misspelt name never reaches a study."""
    unknown = sorted(set(attrs) - STORED_KEYS)
    if unknown:
        raise ValueError(f"not a field of the trial record: {', '.join(unknown)}")
    return attrs


def write(trial: optuna.Trial | FrozenTrial, study: optuna.Study | None = None, /, **fields: Any) -> None:
    """Store ``fields`` (TrialRecord's, by name and typed: ``latency=LatencyResult(...)``) on ``trial``, each as
    its field declares; a closure is written as its own attribute, holding its detail (``duplicate_of=3``). Any
    other name is refused. A trial held as a ``FrozenTrial`` (a sampler's) is written through its ``study``'s
    storage."""
    closure = {k: v for k, v in fields.items() if k in _CLOSURES}
    attrs = _encode({k: v for k, v in fields.items() if k not in closure}) | closure
    for key, value in stored(**attrs).items():
        if isinstance(trial, optuna.Trial):
            trial.set_user_attr(key, value)
        else:
            assert study is not None, "a FrozenTrial is written through its study"
            optuna_private.set_stored_user_attr(study, trial, key, value)


def _fail_note(number: int) -> str:
    return f"fail_reason:{number}"


def note_failure(study: optuna.Study, trial: FrozenTrial, reason: str) -> None:
    """Record why ``trial`` failed after it ended (its own attributes can no longer change): on the study, where
    :func:`load_records` finds it."""
    study.set_user_attr(_fail_note(trial.number), reason)


def load_records(study: optuna.Study, roles: Sequence[Role] = ROLES) -> list[TrialRecord]:
    """Every trial of ``study`` and its companion (explorer.storage._companion: numbered FINALIST_BASE + n) with
    one of ``roles`` as a record, in trial-number order (bookkeeping left out)."""
    out = []
    for part, base in study_parts(study):
        notes = part.user_attrs  # reasons recorded after a trial ended (a dead worker's: RetryStaleTrial)
        for t in part.get_trials(deepcopy=False):
            if is_bookkeeping(t) or role_of(t) not in roles:
                continue
            r = record_from_trial(t)
            if r.state is TrialState.FAIL and r.fail_reason is None and _fail_note(r.number) in notes:
                r = dataclasses.replace(r, fail_reason=str(notes[_fail_note(r.number)]))
            if base:
                retry = None if r.retry_of is None else r.retry_of + base
                r = dataclasses.replace(r, number=r.number + base, retry_of=retry)
            out.append(r)
    return out


def replace(record: TrialRecord, **changes: Any) -> TrialRecord:
    """A copy of ``record`` with ``changes`` (for tests and synthetic studies)."""
    return dataclasses.replace(record, **changes)


@dataclass(frozen=True)
class Retiming:
    """One architecture timed in one round: its forward pass, or one decoding step (``kind``)."""

    key: str  # arch_key of the configuration
    round: int
    latency: LatencyResult  # a decoding step: ms per token, ``seq_len`` = the cache's context
    kind: TimingKind = TimingKind.FORWARD
    pid: int | None = None  # the process that timed it (each round has one of its own; None: not recorded)


def load_retimings(study: optuna.Study) -> list[Retiming]:
    """Every stored re-timing of the study (in the study itself, made before the finalists were kept apart, then
    in its companion), in the order they were measured."""
    rows = [r for part, _ in study_parts(study) for r in part.user_attrs.get(RETIMED_ATTR) or []]
    return [
        Retiming(
            str(r["key"]),
            int(r["round"]),
            LatencyResult.from_dict(r["latency"]),
            TimingKind(r.get("kind", TimingKind.FORWARD)),
            None if r.get("pid") is None else int(r["pid"]),
        )
        for r in rows
    ]


_CLOSED_KINDS = {
    Closure.SURPLUS: "beyond a total",
    Closure.DUPLICATE: "duplicate",
    Closure.EXHAUSTED: "no space left",
}


def closed_counts(study: optuna.Study) -> dict[str, int]:
    """Trials closed without running, by kind: ``beyond a total``, ``duplicate`` (another trial's claim) and
    ``no space left`` (every architecture taken)."""
    out: dict[str, int] = {}
    for t, _ in trials_of(study):  # the study's and its companion's
        closed = closure_of(t)
        if closed is not None:
            kind = _CLOSED_KINDS[closed]
            out[kind] = out.get(kind, 0) + 1
    return out
