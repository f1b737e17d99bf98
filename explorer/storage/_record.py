"""The trial record: what one trial measured, written by the objective and read back by everything else.

:class:`TrialRecord` is the one shape a trial has outside Optuna. Every user attribute of a trial is written
through :func:`write` (or :func:`stored`, for a trial being queued), which refuses a key that is not one of
:data:`STORED_KEYS` (plain JSON values with readable names, so optuna-dashboard shows ``heads = [4, 2]``
rather than an encoded position); :func:`record_from_trial` reads one back from an Optuna ``FrozenTrial``, and
:func:`load_records` reads a whole study; the few readers of one attribute of a running or queued trial
(:func:`role_of`, :func:`finalist_run`...) live here too. Analysis, the report, plots, export and confirmation
read records, never raw attributes. Inside a record everything is typed (tuples, numbers, a
:class:`~explorer.layout._config.ModelConfig`); strings like "4,2" exist only at the CSV, TOML, JSON and
command-line edges.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import optuna
from optuna.trial import FrozenTrial

from explorer.layout import FinalistRun, ModelConfig, Purpose, TrainConfig
from explorer.measures import DecodeResult, LatencyResult, QualityMetric, quality_metric
from explorer.storage import _optuna_private as optuna_private
from explorer.storage._companion import study_parts, trials_of
from explorer.storage._trial_kinds import Closure, Proposal, Role

__all__ = [
    "RECORD_VERSION",
    "RETRY_ATTRS",
    "RETIMED_ATTR",
    "Retiming",
    "ROLES",
    "STORED_KEYS",
    "TrialRecord",
    "arch_key",
    "closed_counts",
    "closure_of",
    "epochs_done",
    "finalist_attrs",
    "finalist_run",
    "is_bookkeeping",
    "load_records",
    "load_retimings",
    "note_failure",
    "proposal_of",
    "record_from_trial",
    "retry_attrs",
    "role_of",
    "seed_of",
    "stored",
    "write",
]

RECORD_VERSION = 4  # 3: kv_heads, head_dim, the task kind, bits per byte, decoding; 4: folds, chance level
ROLES = tuple(Role)
RETRY_ATTRS = ("role", "seed", "finalist")  # what a retried trial inherits: what it is, not what it measured
# Every user attribute a trial may hold: what TrialRecord.to_attrs writes, its progress while it runs ("epoch"),
# the budgets again for optuna-dashboard ("constraints", "feasible") and the marks of a trial closed unrun.
STORED_KEYS = frozenset(
    """record_version role d_model n_layers heads kv_heads head_dim task_kind d_k family min_dk mlp_ratio dropout
    attention lr seed epochs_planned batch_size schedule patience fold folds fold_seed chance history epoch
    val_accuracy test_accuracy val_size latency latency_ms params flops device torch_version train_time_s
    samples_per_s stop fail_reason retry_of proposal rejected relations val_bpb test_bpb val_bpb_se decode
    decode_ms kv_cache_bytes finalist constraints feasible plateaued""".split()  # noqa: SIM905 - a list, kept readable
) | {c.value for c in Closure}
RETIMED_ATTR = "retimed"  # study attribute holding the finalists' re-timings (explorer.study._retime)


def arch_key(config: ModelConfig, lr: float) -> str:
    """What makes two trials the same configuration: the architecture and its learning rate."""
    return f"{config.key()}_lr{lr:.6g}"


@dataclass(frozen=True)
class TrialRecord:
    """One trial of a study, typed. Fields a trial had not reached (a failure, a pruned trial) are None."""

    number: int
    state: str  # COMPLETE | PRUNED | FAIL | RUNNING | WAITING
    role: Role
    config: ModelConfig | None  # the architecture (None only if the trial failed before sampling)
    lr: float | None
    seed: int | None  # the training seed (init, data order, dropout)
    epochs_planned: int | None
    batch_size: int | None = None  # training batch size
    schedule: str = "cosine"  # the lr schedule (plateau: finalists of studies before the fixed schedule)
    patience: int | None = None
    # The task's validation metric after each epoch run: accuracy, or bits per byte for a language model.
    history: tuple[float, ...] = ()
    val_accuracy: float | None = None  # after the last epoch run (a language model: next-byte accuracy)
    test_accuracy: float | None = None
    val_size: int | None = None  # validation targets: accuracies are proportions of this many
    latency: LatencyResult | None = None
    params: int | None = None
    flops: int | None = None
    device: str | None = None
    torch_version: str | None = None
    train_time_s: float | None = None
    samples_per_s: float | None = None
    stop: str | None = None  # why training ended before its plan (a rung; a plateau, in older studies)
    fail_reason: str | None = None
    retry_of: int | None = None  # the killed or interrupted trial this one retries
    constraints: tuple[tuple[str, float], ...] = ()  # (name, value); <= 0 is feasible
    proposal: Proposal | None = None  # how the search chose it
    label: str | None = None  # a finalist's part in the plan: knee, front, 1 head, 8 heads, next faster
    purpose: Purpose | None = None  # a finalist run's: the grid, the horizon's pilot, or the horizon check
    rejected: int = 0  # proposals for already-evaluated architectures the search skipped before this one
    relations: tuple[
        tuple[int, int, int, float], ...
    ] = ()  # (layer, head, relation, attention), relations task
    started: dt.datetime | None = None
    completed: dt.datetime | None = None
    task_kind: str = "classification"  # classification | language_model: which metric is the quality
    val_bpb: float | None = None  # validation bits per byte after the last epoch (language-model tasks)
    test_bpb: float | None = None
    val_bpb_se: float | None = None  # standard error of val_bpb over the validation windows
    decode: DecodeResult | None = None  # decoding latency and key/value cache, when the study measures it
    fold: int | None = None  # the cross-validation fold it validated on (None: the task's fixed split)
    folds: int | None = None  # how many folds its replicate was cut into
    fold_seed: int | None = None  # the seed that cut its replicate's folds
    chance: float | None = None  # what learning nothing scores on its validation split (engine.tasks.folds)
    closed: Closure | None = None  # why it was closed without running (None: it ran, or runs)
    epoch: int | None = None  # the last epoch it finished (progress while it runs)
    plateaued: bool | None = None  # a finished finalist run: its curve had flattened (answer._horizon)

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
        """How this trial's task is scored (explorer.measures.quality_metric of its task kind)."""
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
        return self.state == "COMPLETE" and self.quality is not None and self.latency is not None

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

    def _fold_attrs(self) -> dict[str, Any]:
        return {"fold": self.fold, "folds": self.folds, "fold_seed": self.fold_seed, "chance": self.chance}

    def arch_attrs(self) -> dict[str, Any]:
        """The architecture as readable user attributes (what the objective writes first)."""
        c = self.config
        assert c is not None
        extra: dict[str, Any] = {"head_dim": list(c.head_dim)} if c.head_dim is not None else {}
        if self.task_kind != "classification":
            extra["task_kind"] = self.task_kind
        return {
            "record_version": RECORD_VERSION,
            "role": self.role,
            "d_model": c.d_model,
            "n_layers": c.n_layers,
            "heads": list(c.heads),
            "kv_heads": list(c.kv_per_layer),  # equal to heads: ordinary multi-head attention
            **extra,
            "d_k": list(c.d_k),
            "family": c.family,
            "min_dk": c.min_dk,
            "mlp_ratio": c.mlp_ratio,
            "attention": c.attention,
            "lr": self.lr,
            "seed": self.seed,
            "epochs_planned": self.epochs_planned,
            "batch_size": self.batch_size,
            "schedule": self.schedule,
            "patience": self.patience,
            **{k: v for k, v in self._fold_attrs().items() if v is not None},
        }

    def to_attrs(self) -> dict[str, Any]:
        """Every field as the user attributes the objective writes (what :func:`record_from_trial` reads back;
        constraints and the trial's state, number and times live in Optuna's own fields)."""
        attrs = (
            self.arch_attrs()
            if self.config is not None
            else {"record_version": RECORD_VERSION, "role": self.role}
        )
        optional = {
            "history": list(self.history),
            "val_accuracy": self.val_accuracy,
            "test_accuracy": self.test_accuracy,
            "val_size": self.val_size,
            "latency": None if self.latency is None else self.latency.to_dict(),
            "latency_ms": self.latency_ms,
            "params": self.params,
            "flops": self.flops,
            "device": self.device,
            "torch_version": self.torch_version,
            "train_time_s": self.train_time_s,
            "samples_per_s": self.samples_per_s,
            "stop": self.stop,
            "fail_reason": self.fail_reason,
            "retry_of": self.retry_of,
            "proposal": self.proposal,
            "rejected": self.rejected,
            "relations": [list(r) for r in self.relations] or None,
            "val_bpb": self.val_bpb,
            "test_bpb": self.test_bpb,
            "val_bpb_se": self.val_bpb_se,
            "decode": None if self.decode is None else self.decode.to_dict(),
            "decode_ms": self.decode_ms,
            "kv_cache_bytes": None if self.decode is None else self.decode.kv_cache_bytes,
            "plateaued": self.plateaued,
        }
        if self.label is not None and self.config is not None and self.lr is not None:
            optional["finalist"] = {
                "model": self.config.to_dict(),
                "lr": self.lr,
                "label": self.label,
                "source": None,
            } | (
                {} if self.purpose is None else {"epochs": self.epochs_planned, "purpose": self.purpose.value}
            )
        return {**attrs, **{k: v for k, v in optional.items() if v is not None}}


def _tuple_pairs(value: Any) -> tuple[tuple[str, float], ...]:
    if isinstance(value, Mapping):
        return tuple(sorted((str(k), float(v)) for k, v in value.items()))
    return ()


def _config(a: Mapping[str, Any]) -> ModelConfig | None:
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


def _opt(a: Mapping[str, Any], key: str, kind: type) -> Any:
    v = a.get(key)
    return None if v is None else kind(v)


# The fields stored under their own name as one optional number, string or proposal: read back by their declared
# type. Every other field is built from its parts below (TrialRecord's fields are all one or the other).
_SCALAR_TYPES: dict[str, type] = {
    "bool | None": bool,
    "int | None": int,
    "float | None": float,
    "str | None": str,
    "Proposal | None": Proposal,
}
SCALAR_FIELDS: tuple[tuple[str, type], ...] = tuple(
    (f.name, _SCALAR_TYPES[str(f.type)])
    for f in dataclasses.fields(TrialRecord)
    if str(f.type) in _SCALAR_TYPES and f.name in STORED_KEYS
)


def record_from_trial(t: FrozenTrial) -> TrialRecord:
    """The record of one Optuna trial (any state), from the user attributes the objective wrote: the scalar
    fields generically (:data:`SCALAR_FIELDS`), the structured ones from their parts."""
    a = t.user_attrs
    relations = tuple(
        (int(r[0]), int(r[1]), int(r[2]), float(r[3])) for r in a.get("relations") or () if len(r) == 4
    )
    return TrialRecord(
        number=t.number,
        state=t.state.name,
        role=Role(a.get("role", Role.SEARCH)),
        config=_config(a),
        schedule=str(a.get("schedule", "cosine")),
        history=tuple(float(x) for x in a.get("history") or ()),
        latency=LatencyResult.from_dict(a["latency"]) if isinstance(a.get("latency"), Mapping) else None,
        decode=DecodeResult.from_dict(a["decode"]) if isinstance(a.get("decode"), Mapping) else None,
        constraints=_tuple_pairs(t.constraints) or _tuple_pairs(a.get("constraints")),
        label=_opt(a.get("finalist") or {}, "label", str),
        purpose=_purpose(a),
        rejected=int(a.get("rejected", 0) or 0),
        relations=relations,
        started=t.datetime_start,
        completed=t.datetime_complete,
        task_kind=str(a.get("task_kind", "classification")),
        closed=closure_of(t),
        **{name: _opt(a, name, kind) for name, kind in SCALAR_FIELDS if name != "epochs_planned"},
        epochs_planned=_planned(t),
    )


def _planned(t: FrozenTrial) -> int | None:
    """The epochs a trial plans: written when it starts, or (a queued finalist run) the horizon it carries."""
    a = t.user_attrs
    value = a.get("epochs_planned")
    if value is None and isinstance(a.get("finalist"), Mapping):
        value = a["finalist"].get("epochs")
    return None if value is None else int(value)


def _purpose(a: Mapping[str, Any]) -> Purpose | None:
    """A finalist run's purpose (runs queued before horizons were chosen are grid runs)."""
    run = a.get("finalist")
    return None if not isinstance(run, Mapping) else Purpose(run.get("purpose", Purpose.GRID))


def closure_of(t: FrozenTrial) -> Closure | None:
    """Why a trial was closed without running (None: it ran, runs or waits)."""
    return next((c for c in Closure if c.value in t.user_attrs), None)


def is_bookkeeping(t: FrozenTrial) -> bool:
    """A trial closed without running (beyond the total, or a configuration another trial already owns)."""
    return closure_of(t) is not None


def role_of(t: optuna.Trial | FrozenTrial) -> Role:
    """A trial's role (search when it has none: trials from before roles)."""
    return Role(t.user_attrs.get("role", Role.SEARCH))


def finalist_attrs(run: FinalistRun) -> dict[str, Any]:
    """The user attributes of the trial queued to run ``run``: a finalist, its seed and the run
    (:func:`finalist_run` reads it back)."""
    return stored(role=Role.FINALIST, seed=run.seed, finalist=run.attrs())


def finalist_run(t: optuna.Trial | FrozenTrial) -> FinalistRun | None:
    """The finalist run a queued trial carries (None: not a finalist run; :func:`finalist_attrs` writes it)."""
    a = t.user_attrs
    return None if "finalist" not in a else FinalistRun.from_attrs(a["finalist"], int(a["seed"]))


def epochs_done(t: FrozenTrial) -> int:
    """How many epochs a trial has trained (while it runs: the last it reported)."""
    a = t.user_attrs
    return int(a.get("epoch", len(a.get("history") or ())))


def seed_of(t: optuna.Trial | FrozenTrial, default: int) -> int:
    """The training seed a trial was queued with (a retry, a finalist run), else ``default``."""
    return int(t.user_attrs.get("seed", default))


def proposal_of(study: optuna.Study, trial: optuna.Trial) -> Proposal | None:
    """How the search proposed a running trial, as stored now: the sampler notes it in the storage after the
    trial object cached its attributes (Optuna samples relative parameters lazily)."""
    return _opt(optuna_private.stored_user_attrs(study, trial), "proposal", Proposal)


def retry_attrs(t: optuna.Trial | FrozenTrial) -> dict[str, Any]:
    """The user attributes of the trial queued to retry ``t``: what it is (:data:`RETRY_ATTRS`), not what it
    measured, and which trial it retries."""
    return stored(**{k: t.user_attrs[k] for k in RETRY_ATTRS if k in t.user_attrs}, retry_of=t.number)


def stored(**fields: Any) -> dict[str, Any]:
    """``fields`` as a trial's user attributes (for ``enqueue_trial`` and ``create_trial``); a key that is not one
    of :data:`STORED_KEYS` is refused, so a misspelt name never reaches a study."""
    unknown = sorted(set(fields) - STORED_KEYS)
    if unknown:
        raise ValueError(f"not a field of the trial record: {', '.join(unknown)}")
    return fields


def write(trial: optuna.Trial | FrozenTrial, study: optuna.Study | None = None, /, **fields: Any) -> None:
    """Store ``fields`` on ``trial`` (checked by :func:`stored`). A trial held as a ``FrozenTrial`` (a sampler's)
    is written through its ``study``'s storage."""
    for key, value in stored(**fields).items():
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
            if r.state == "FAIL" and r.fail_reason is None and _fail_note(r.number) in notes:
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
    kind: str = "forward"  # forward | decode
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
            str(r.get("kind", "forward")),
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
