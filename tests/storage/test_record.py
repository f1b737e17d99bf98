"""Trial records round-trip through Optuna's user attributes: key/value heads, head widths, bits per byte and
decoding latency included, and records written before them still read."""

from __future__ import annotations

import dataclasses

import optuna
import pytest
from optuna.trial import TrialState, create_trial

from explorer.layout import FinalistRun, ModelConfig, Purpose
from explorer.measurements import DecodeResult
from explorer.storage import (
    RETIMED_ATTR,
    Closure,
    Proposal,
    Role,
    TimingKind,
    TrialRecord,
    closure_of,
    finalist_attrs,
    finalist_run,
    is_bookkeeping,
    load_records,
    load_retimings,
    record_from_trial,
    retry_attrs,
    role_of,
    write,
)
from explorer.storage._record import STORED_KEYS, stored as checked_attrs
from tests.fixtures import latency, record


def stored(r: TrialRecord, state: TrialState = TrialState.COMPLETE) -> TrialRecord:
    """``r`` written as the objective writes it, into a real study, and read back."""
    study = optuna.create_study(directions=["minimize", "minimize"])
    study.add_trial(create_trial(state=state, values=[1.0, 1.0], user_attrs=r.to_attrs()))
    return record_from_trial(study.trials[-1])


def lm_record(config: ModelConfig) -> TrialRecord:
    decode = DecodeResult(
        latency(0.8),
        context=512,
        kv_cache_bytes=config.kv_cache_bytes(512),
        kv_cache_bytes_per_token=config.kv_cache_bytes_per_token(),
    )
    return dataclasses.replace(
        record(0, (4, 4), 0.0, 2.0),
        config=config,
        task_kind="language_model",
        history=(4.1, 3.7, 3.5),
        val_accuracy=0.41,
        test_accuracy=0.40,
        val_bpb=3.5,
        test_bpb=3.6,
        val_bpb_se=0.02,
        decode=decode,
    )


@pytest.mark.parametrize(
    "config",
    [
        ModelConfig(64, (8, 8), kv_heads=(2, 2)),
        ModelConfig(64, (8, 4), kv_heads=(1, 4)),  # grouped in one layer, multi-head in the other
        ModelConfig(64, (3, 6), head_dim=16, kv_heads=(1, 2)),  # heads that do not divide d_model
        ModelConfig(64, (4, 4)),  # classic: kv_heads = heads, d_k = d_model / heads
    ],
    ids=["gqa", "mixed", "head_dim", "classic"],
)
def test_a_language_model_record_round_trips(config):
    r = lm_record(config)
    back = stored(r)
    assert back.config == config and back.config.key() == config.key()
    assert back.config.kv_per_layer == config.kv_per_layer and back.config.d_k == config.d_k
    assert back.task_kind == "language_model" and back.metric.name == "val_bpb"
    assert (back.val_bpb, back.test_bpb, back.val_bpb_se) == (3.5, 3.6, 0.02)
    assert back.quality == 3.5 and back.test_quality == 3.6 and back.history == (4.1, 3.7, 3.5)
    assert back.decode == r.decode and back.decode_ms == pytest.approx(0.8)
    assert back.decode.kv_cache_bytes == config.kv_cache_bytes(512)
    assert back.finished


def test_the_architecture_attributes_are_readable_on_a_dashboard():
    attrs = lm_record(ModelConfig(64, (8, 8), kv_heads=(2, 2))).arch_attrs()
    assert attrs["heads"] == [8, 8] and attrs["kv_heads"] == [2, 2] and attrs["task_kind"] == "language_model"
    assert "head_dim" not in attrs  # only where the width is set apart from d_model / heads
    wide = lm_record(ModelConfig(64, (2, 2), head_dim=16)).arch_attrs()
    assert wide["head_dim"] == [16, 16] and wide["d_k"] == [16, 16]


def test_a_classification_record_keeps_its_shape_and_meaning():
    r = record(3, (4, 2), 0.83, 1.5)
    back = stored(r)
    assert back == dataclasses.replace(r, number=back.number, started=back.started, completed=back.completed)
    assert back.metric.name == "val_accuracy" and back.quality == 0.83 and back.decode is None
    assert "task_kind" not in r.arch_attrs() and "val_bpb" not in r.to_attrs()


def test_a_record_written_before_key_value_heads_still_reads():
    attrs = record(1, (4, 4), 0.8, 1.0).to_attrs()
    for key in ("kv_heads", "task_kind"):
        attrs.pop(key, None)
    attrs["record_version"] = 2
    study = optuna.create_study(directions=["maximize", "minimize"])
    study.add_trial(create_trial(state=TrialState.COMPLETE, values=[0.8, 1.0], user_attrs=attrs))
    back = load_records(study)[0]
    assert back.config.kv_heads is None and back.config.kv_per_layer == (4, 4)
    assert back.task_kind == "classification" and back.quality == 0.8


def test_retimings_carry_their_kind_and_old_ones_are_forward_passes():
    study = optuna.create_study()
    lat = latency(1.0).to_dict()
    study.set_user_attr(
        RETIMED_ATTR,
        [
            {"key": "a", "round": 0, "latency": lat},
            {"key": "a", "round": 0, "latency": lat, "kind": "decode"},
        ],
    )
    assert [t.kind for t in load_retimings(study)] == [TimingKind.FORWARD, TimingKind.DECODE]


def test_the_record_is_written_through_one_function_that_refuses_unknown_keys(tmp_path):
    study = optuna.create_study(storage=f"sqlite:///{tmp_path / 's.db'}")
    trial = study.ask()
    with pytest.raises(ValueError, match="not a field of the trial record: accuracy"):
        write(trial, val_accuracy=0.5, accuracy=0.5)
    assert study.trials[0].user_attrs == {}  # nothing of a refused write reaches the study
    write(trial, role=Role.FINALIST, epoch=2, proposal=Proposal.ENQUEUED, **{Closure.DUPLICATE.value: 3})
    frozen = study.trials[0]
    # stored as the plain strings studies have always held
    assert frozen.user_attrs == {"role": "finalist", "epoch": 2, "proposal": "enqueued", "duplicate_of": 3}
    assert all(type(v) is str for v in (frozen.user_attrs["role"], frozen.user_attrs["proposal"]))
    back = record_from_trial(frozen)
    assert (back.role, back.proposal, back.closed, back.epoch) == (
        Role.FINALIST,
        Proposal.ENQUEUED,
        Closure.DUPLICATE,
        2,
    )
    assert back.role is Role.FINALIST and role_of(frozen) is Role.FINALIST and is_bookkeeping(frozen)
    write(frozen, study, rejected=4)  # a sampler holds a FrozenTrial: written through the study's storage
    assert record_from_trial(study.trials[0]).rejected == 4


def test_every_attribute_a_record_writes_is_a_stored_key():
    r = dataclasses.replace(lm_record(ModelConfig(64, (4, 4))), label="knee", proposal=Proposal.SAMPLER)
    assert set(r.to_attrs()) <= STORED_KEYS
    assert checked_attrs(**r.to_attrs()) == r.to_attrs()


def test_a_retry_inherits_what_the_trial_is_not_what_it_measured():
    study = optuna.create_study()
    attrs = {
        "role": "finalist",
        "seed": 7,
        "finalist": {"model": ModelConfig(64, (4, 4)).to_dict(), "lr": 0.01},
    }
    study.add_trial(
        create_trial(state=TrialState.FAIL, user_attrs={**attrs, "val_accuracy": 0.3, "epoch": 2})
    )
    failed = study.trials[0]
    assert retry_attrs(failed) == {**attrs, "retry_of": 0}
    run = finalist_run(failed)
    assert run is not None and (run.seed, run.lr, run.config.heads, run.fold) == (7, 0.01, (4, 4), None)


def test_a_queued_finalist_run_reads_back_as_the_run_it_was_queued_with():
    run = FinalistRun(ModelConfig(64, (4, 4)), 0.01, 7, "knee", fold=1, folds=2, fold_seed=3, epochs=4)
    study = optuna.create_study()
    study.enqueue_trial({}, user_attrs=finalist_attrs(run))
    queued = study.trials[0]
    assert role_of(queued) is Role.FINALIST and finalist_run(queued) == run
    assert queued.user_attrs["role"] == "finalist" and closure_of(queued) is None


def test_roles_and_stages_are_enums_that_read_as_their_stored_strings():
    assert Role("search") is Role.SEARCH and Role("finalist") is Role.FINALIST
    assert f"{Role.SEARCH}" == str(Role.SEARCH) == "search" and Role.FINALIST == "finalist"
    assert [c.value for c in Closure] == ["surplus", "duplicate_of", "exhausted"]
    with pytest.raises(ValueError):
        Role("finalists")


def every_field_set() -> TrialRecord:
    """A record whose every stored field holds something other than its default."""
    config = ModelConfig(64, (8, 4), kv_heads=(2, 4), head_dim=16)
    return dataclasses.replace(
        lm_record(config),
        role=Role.FINALIST,
        seed=11,
        epochs_planned=40,
        schedule="plateau",
        patience=3,
        stop="rung 1",
        fail_reason="out of memory",
        retry_of=2,
        constraints=(("latency_ms", -0.5), ("params", 2.0)),
        label="knee",
        purpose=Purpose.CHECK,
        rejected=4,
        relations=((0, 1, 2, 0.25), (1, 0, 3, 0.5)),
        fold=1,
        folds=5,
        fold_seed=7,
        chance=0.1,
        val_size=270,
        samples_per_s=1e3,
        train_time_s=12.5,
        closed=Closure.DUPLICATE,
        epoch=3,
        plateaued=True,
    )


def test_every_field_declares_how_it_is_kept_and_writes_only_its_keys():
    """The schema is TrialRecord's fields: each declares its user attributes (or that Optuna keeps it), writes
    only those, and STORED_KEYS is exactly what they declare; no two fields share an attribute but the two
    parts of a queued finalist run."""
    from explorer.storage._record import _SCHEMA, _attr

    fields = dataclasses.fields(TrialRecord)
    assert all(_SCHEMA in f.metadata for f in fields)
    assert {f.name for f in fields if not _attr(f).keys(f)} == {"number", "state", "started", "completed"}
    full = every_field_set()
    values = {f.name: getattr(full, f.name) for f in fields}
    owners: dict[str, list[str]] = {}
    for f in fields:
        written = _attr(f).put(f, values)
        assert set(written) <= set(_attr(f).keys(f)), f.name
        for key in _attr(f).keys(f):
            owners.setdefault(key, []).append(f.name)
    shared = {key: names for key, names in owners.items() if len(names) > 1}
    assert shared == {"finalist": ["label", "purpose"]}
    assert set(owners) == STORED_KEYS and set(full.to_attrs()) <= STORED_KEYS


def test_every_stored_field_round_trips():
    """A record written as the objective writes it reads back equal, field for field, each with its type; a
    queued finalist run's horizon comes back from its finalist attribute."""
    from explorer.storage._record import _attr

    full = every_field_set()
    unset = [
        f.name
        for f in dataclasses.fields(TrialRecord)
        if _attr(f).keys(f) and f.default is not dataclasses.MISSING and getattr(full, f.name) == f.default
    ]
    assert unset == [], "every_field_set must set every stored field, so that this round trip covers it"
    back = stored(full)
    assert back == dataclasses.replace(
        full, number=back.number, started=back.started, completed=back.completed
    )
    assert isinstance(back.seed, int) and isinstance(back.val_accuracy, float)
    assert back.role is Role.FINALIST and back.closed is Closure.DUPLICATE and back.purpose is Purpose.CHECK
    queued = {k: v for k, v in full.to_attrs().items() if k != "epochs_planned"}
    study = optuna.create_study()
    study.add_trial(create_trial(state=TrialState.PRUNED, user_attrs=queued))
    again = record_from_trial(study.trials[0])
    assert again.purpose is Purpose.CHECK and again.epochs_planned == 40 and closure_of(study.trials[0])


def test_the_stored_names_are_those_studies_have_always_held():
    """Studies already in a database are read by these names: renaming a field must not rename its attribute."""
    from explorer.storage._record import RETRY_ATTRS

    held = """record_version role d_model n_layers heads kv_heads head_dim task_kind d_k family min_dk mlp_ratio
    dropout attention lr seed epochs_planned batch_size schedule patience fold folds fold_seed chance history epoch
    val_accuracy test_accuracy val_size latency latency_ms params flops device torch_version train_time_s
    samples_per_s stop fail_reason retry_of proposal rejected relations val_bpb test_bpb val_bpb_se decode
    decode_ms kv_cache_bytes finalist constraints feasible plateaued surplus duplicate_of exhausted"""
    assert STORED_KEYS == set(held.split())
    assert RETRY_ATTRS == ("role", "seed", "finalist")


def test_epochs_done_and_seed_of_read_what_a_trial_holds():
    from explorer.storage import epochs_done, seed_of

    study = optuna.create_study()
    study.add_trial(
        create_trial(state=TrialState.COMPLETE, value=1.0, user_attrs={"history": [0.5, 0.6, 0.7]})
    )
    study.add_trial(
        create_trial(state=TrialState.RUNNING, user_attrs={"history": [0.5], "epoch": 4, "seed": 9})
    )
    done, running = study.trials
    assert epochs_done(done) == 3 and epochs_done(running) == 4  # a running trial: the last epoch it reported
    assert seed_of(done, 42) == 42 and seed_of(running, 42) == 9


def test_proposal_of_reads_what_the_storage_holds_now_not_the_trials_cache():
    from explorer.storage import proposal_of

    study = optuna.create_study()
    trial = study.ask()
    assert proposal_of(study, trial) is None
    write(study.get_trials(deepcopy=False)[0], study, proposal=Proposal.SAMPLER)  # as the sampler notes it
    assert "proposal" not in trial.user_attrs and proposal_of(study, trial) == Proposal.SAMPLER


def test_closed_counts_counts_the_trials_closed_without_running_by_kind():
    from explorer.storage import closed_counts

    study = optuna.create_study()
    for closure in (Closure.DUPLICATE, Closure.DUPLICATE, Closure.SURPLUS):
        study.add_trial(create_trial(state=TrialState.PRUNED, user_attrs={closure.value: 1}))
    study.add_trial(create_trial(state=TrialState.COMPLETE, value=1.0))
    counts = closed_counts(study)
    assert sum(counts.values()) == 3 and sorted(counts.values()) == [1, 2]
    assert counts.get("duplicate") == 2
