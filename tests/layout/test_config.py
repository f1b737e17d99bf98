"""The head rules and schedule expansion: the invariants every variant in the product relies on."""

from __future__ import annotations

import pytest

from explorer.errors import ConfigError
from explorer.layout import InputSpec, ModelConfig, TrainConfig, expand_schedule, valid_heads
from explorer.layout._schedules import schedule_family


@pytest.mark.parametrize(
    ("d_model", "min_dk", "expected"),
    [(512, 16, [1, 2, 4, 8, 16, 32]), (96, 16, [1, 2, 3, 4, 6]), (64, 8, [1, 2, 4, 8]), (7, 1, [1, 7])],
)
def test_valid_heads_examples(d_model, min_dk, expected):
    assert valid_heads(d_model, min_dk) == expected


@pytest.mark.parametrize("d_model", [48, 64, 96, 384, 512])
@pytest.mark.parametrize("min_dk", [1, 8, 16, 32])
def test_valid_heads_obey_both_rules_and_miss_none(d_model, min_dk):
    heads = valid_heads(d_model, min_dk)
    assert all(d_model % h == 0 and d_model // h >= min_dk for h in heads)
    assert len(heads) == sum(1 for h in range(1, d_model + 1) if d_model % h == 0 and d_model // h >= min_dk)


def test_valid_heads_rejects_nonsense():
    with pytest.raises(ConfigError):
        valid_heads(0)
    with pytest.raises(ConfigError):
        valid_heads(64, 0)


@pytest.mark.parametrize(
    ("schedule", "layers", "d_model", "min_dk", "expected"),
    [
        ("uniform:8", 3, 64, 8, (8, 8, 8)),
        ("4", 2, 64, 8, (4, 4)),
        ("increasing:4-16", 4, 256, 16, (4, 8, 8, 16)),
        ("decreasing:16-4", 4, 256, 16, (16, 8, 8, 4)),
        ("increasing:2-8", 4, 64, 8, (2, 4, 4, 8)),
        ("increasing:1-6", 5, 96, 16, (1, 2, 3, 4, 6)),
        ("increasing:4-4", 3, 64, 8, (4, 4, 4)),
        ("increasing:2-8", 1, 64, 8, (2,)),
        ("4,4,8,16", 4, 256, 16, (4, 4, 8, 16)),
        (" 2, 4 ", 2, 64, 1, (2, 4)),
    ],
)
def test_expand_schedule(schedule, layers, d_model, min_dk, expected):
    heads = expand_schedule(schedule, layers, d_model, min_dk)
    assert heads == expected
    assert all(d_model % h == 0 and d_model // h >= min_dk for h in heads)


def test_ramps_are_monotone_and_hit_both_ends():
    for layers in range(2, 9):
        up = expand_schedule("increasing:1-32", layers, 512, 16)
        assert up[0] == 1 and up[-1] == 32 and list(up) == sorted(up)
        assert expand_schedule("decreasing:32-1", layers, 512, 16) == up[::-1]


@pytest.mark.parametrize(
    ("schedule", "layers", "d_model", "min_dk", "message"),
    [
        ("uniform:5", 2, 64, 1, "choose from 1, 2, 4, 8, 16, 32, 64"),
        ("uniform:8", 2, 64, 16, "8 is below the floor 16.*choose from 1, 2, 4\\."),
        ("increasing:16-4", 4, 256, 16, "increasing needs its first count <= its second"),
        ("decreasing:4-16", 4, 256, 16, "decreasing needs its first count >= its second"),
        ("increasing:3-16", 4, 256, 16, "256 is not divisible by 3"),
        ("4,8", 3, 64, 8, "lists 2 head counts but the model has 3 layers"),
        ("4,8,6", 3, 64, 8, "6 heads is not valid"),
        ("lots", 2, 64, 8, "cannot read head schedule"),
        ("uniform:4", 0, 64, 8, "at least 1"),
    ],
)
def test_schedule_errors_name_the_valid_choices(schedule, layers, d_model, min_dk, message):
    with pytest.raises(ConfigError, match=message.replace("(", r"\(")):
        expand_schedule(schedule, layers, d_model, min_dk)


def test_schedule_family():
    assert schedule_family((8, 8)) == "uniform"
    assert schedule_family((2, 4, 4)) == "increasing"
    assert schedule_family((8, 4, 1)) == "decreasing"
    assert schedule_family((2, 8, 4)) == "free"
    assert schedule_family((4,)) == "uniform"


def test_model_config_is_valid_by_construction():
    cfg = ModelConfig.from_schedule(64, 4, "increasing:2-8", min_dk=8)
    assert cfg.heads == (2, 4, 4, 8) and cfg.d_k == (32, 16, 16, 8) and cfg.n_layers == 4
    assert cfg.family == "increasing"
    assert ModelConfig.from_dict(cfg.to_dict()) == cfg
    with pytest.raises(ConfigError, match="below the floor"):
        ModelConfig(d_model=64, heads=(16,), min_dk=8)
    with pytest.raises(ConfigError, match="attention must be one of"):
        ModelConfig(d_model=64, heads=(4,), attention="flash")
    with pytest.raises(ConfigError, match="unknown model config keys"):
        ModelConfig.from_dict({**cfg.to_dict(), "n_heads": 4})


def test_architecture_key_ignores_what_latency_does_not_depend_on():
    a = ModelConfig(d_model=64, heads=(4, 8), dropout=0.0, schedule="4,8")
    b = ModelConfig(d_model=64, heads=(4, 8), dropout=0.1, schedule="increasing:4-8")
    c = ModelConfig(d_model=64, heads=(8, 4))
    assert a.key() == b.key() != c.key()


def test_other_configs_validate():
    with pytest.raises(ConfigError):
        TrainConfig(epochs=0)
    with pytest.raises(ConfigError):
        TrainConfig(lr=0)
    with pytest.raises(ConfigError):
        InputSpec(kind="tokens", seq_len=8, n_classes=2)
    with pytest.raises(ConfigError):
        InputSpec(kind="features", seq_len=8, n_classes=1, n_features=3)


def test_ramps_round_half_up_so_they_step_evenly():
    # 7 layers over 4 counts: positions 0, .5, 1, 1.5, 2, 2.5, 3. Rounding half to even (Python's round) gave
    # 1, 2, 1, 3 layers per count (2,2,4,8,8,8,16); half up gives 1, 2, 2, 2.
    assert expand_schedule("increasing:2-16", 7, 64) == (2, 4, 4, 8, 8, 16, 16)
    assert expand_schedule("decreasing:16-2", 7, 64) == (16, 16, 8, 8, 4, 4, 2)


def _spec_with(**tables):
    from explorer.spec import spec_from_dict

    space = {"d_model": [32], "n_layers": [2], "heads": [1, 2, 4], **tables.pop("space", {})}
    return spec_from_dict(
        {"name": "c", "n_trials": 2, "task": {"name": "relations"}, "space": space, **tables}
    )


def test_the_attention_impls_are_what_a_spec_may_choose():
    from explorer.errors import SpecError
    from explorer.layout import ATTENTION_IMPLS

    assert {_spec_with(space={"attention": impl}).space.attention for impl in ATTENTION_IMPLS} == set(
        ATTENTION_IMPLS
    )
    with pytest.raises(SpecError, match="flash"):
        _spec_with(space={"attention": "flash"})


def test_the_latency_dtypes_and_runtimes_are_what_a_spec_may_choose():
    from explorer.errors import SpecError
    from explorer.layout import LATENCY_DTYPES, LATENCY_RUNTIMES

    assert [_spec_with(latency={"dtype": d}).latency.dtype for d in LATENCY_DTYPES] == list(LATENCY_DTYPES)
    assert _spec_with(latency={"runtime": LATENCY_RUNTIMES[0]}).latency.runtime == LATENCY_RUNTIMES[0]
    with pytest.raises(SpecError) as err:
        _spec_with(latency={"runtime": "tensorrt"})
    assert all(r in str(err.value) for r in LATENCY_RUNTIMES)
    with pytest.raises(SpecError):
        _spec_with(latency={"dtype": "float64"})


def test_the_schedule_families_are_the_families_a_spec_may_list():
    from explorer.errors import SpecError
    from explorer.layout import SCHEDULE_FAMILIES

    deep = _spec_with(space={"n_layers": [3]})
    assert deep.space.families == SCHEDULE_FAMILIES  # left out: every family the space realises
    with pytest.raises(SpecError, match="choose from " + ", ".join(SCHEDULE_FAMILIES)):
        _spec_with(space={"families": ["zigzag"]})


def test_max_folds_is_the_most_folds_the_finalists_may_cut():
    from explorer.errors import SpecError
    from explorer.layout import MAX_FOLDS

    assert _spec_with(finalists={"folds": MAX_FOLDS}).finalists.folds == MAX_FOLDS
    with pytest.raises(SpecError, match=f"at most {MAX_FOLDS} folds"):
        _spec_with(finalists={"folds": MAX_FOLDS + 1})


def test_the_device_names_are_declared_once_and_every_surface_says_them():
    from click.testing import CliRunner

    from explorer.cli import main
    from explorer.layout import DEVICE_CHOICES, DEVICE_NAMES, LatencyConfig

    for name in (
        *DEVICE_CHOICES,
        "cuda:1",
    ):  # a name is checked here; whether the device exists, where it runs
        assert LatencyConfig(device=name).device == name
    with pytest.raises(ConfigError, match=f"latency device must be {DEVICE_NAMES}, got 'tpu'"):
        LatencyConfig(device="tpu")
    for command in (["study", "run"], ["train"], ["bench", "model"]):
        shown = " ".join(CliRunner().invoke(main, [*command, "--help"]).output.split())
        assert DEVICE_NAMES in shown, command
