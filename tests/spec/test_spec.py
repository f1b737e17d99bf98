"""Study specs: strict parsing (every bad input is one SpecError naming the key), round trips, committed specs."""

from __future__ import annotations

import copy
import json
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from explorer.errors import SpecError
from explorer.fields import REQUIRED, default_of, key, key_of, spec_fields
from explorer.spec import StudySpec, load_spec, spec_from_dict
from explorer.spec._keys import SPEC_KEYS, TABLE_CLASSES
from explorer.spec._spec import read_spec_file
from explorer.spec._toml import read_table

ROOT = Path(__file__).resolve().parents[2]
STUDIES = ROOT / "studies"
# every spec in the repository: the studies and the examples, so a new one is covered without editing this file
COMMITTED = sorted([*STUDIES.glob("*.toml"), *(ROOT / "examples").glob("**/*.toml")])


def base() -> dict[str, Any]:
    """A small valid spec with every table present."""
    return {
        "name": "t",
        "n_trials": 10,
        "sampler": "random",
        "seed": 3,
        "objectives": {"accuracy": "maximize", "latency": "minimize"},
        "task": {"name": "digits", "options": {}, "epochs": 4, "batch_size": 32},
        "space": {"d_model": [32, 64], "n_layers": [2, 3], "heads": [1, 2, 4], "min_dk": 8},
        "latency": {"device": "cpu", "batch_size": 16, "threads": 1},
        "budgets": {"max_latency_ms": 3.0},
        "early_stopping": {"enabled": True, "min_epochs": 2, "reduction": 2, "alpha": 0.05},
        "finalists": {"enabled": True, "top": 2, "seeds": 3, "folds": 3, "epochs": 6},
    }


def with_(path: str, value: Any) -> dict[str, Any]:
    """``base()`` with ``path`` ("space.d_model") set to ``value`` (or removed when value is ...)."""
    d = base()
    *tables, key = path.split(".")
    target = d
    for t in tables:
        target = target[t]
    if value is ...:
        del target[key]
    else:
        target[key] = value
    return d


def fails(data: dict[str, Any], *fragments: str) -> str:
    with pytest.raises(SpecError) as info:
        spec_from_dict(data)
    message = str(info.value)
    for fragment in fragments:
        assert fragment in message, message
    assert "\n" not in message
    return message


def test_base_is_valid_and_defaults_fill_in():
    spec = spec_from_dict(base())
    assert spec.storage is None and spec.timeout is None
    assert spec.space.families == ("uniform", "increasing", "decreasing", "free")
    assert spec.space.min_dk == (8,) and spec.space.mlp_ratio == (4.0,) and spec.space.lr == 3e-3
    assert spec.objective_names() == ["accuracy", "latency"]
    assert spec.directions() == ["maximize", "minimize"]
    assert spec.budgets.max_latency_ms == 3.0 and spec.budgets.max_params is None


def test_minimal_spec_needs_only_the_required_keys():
    spec = spec_from_dict(
        {
            "name": "m",
            "n_trials": 1,
            "task": {"name": "relations"},
            "space": {"d_model": [8], "n_layers": [1], "heads": [2]},
        }
    )
    assert spec.sampler == "tpe" and spec.seed == 0 and spec.latency.device == "auto"
    assert spec.early_stopping.enabled and spec.task.epochs == 10


def test_params_objective_adds_a_third_direction():
    spec = spec_from_dict(with_("objectives.params", "minimize"))
    assert spec.objective_names() == ["accuracy", "latency", "params"]
    assert spec.directions() == ["maximize", "minimize", "minimize"]


@pytest.mark.parametrize(
    ("table", "where", "an_allowed_key"),
    [
        ("", "top level", "n_trials"),
        ("objectives", "[objectives]", "params"),
        ("task", "[task]", "batch_size"),
        ("space", "[space]", "min_dk"),
        ("latency", "[latency]", "threads"),
        ("budgets", "[budgets]", "max_params"),
        ("early_stopping", "[early_stopping]", "alpha"),
        ("finalists", "[finalists]", "seeds"),
    ],
)
def test_unknown_key_at_every_level_names_key_table_and_allowed(table, where, an_allowed_key):
    path = f"{table}.bogus_key" if table else "bogus_key"
    fails(with_(path, 1), "'bogus_key'", where, "allowed keys", an_allowed_key)


@pytest.mark.parametrize(
    ("path", "value", "expected"),
    [
        ("n_trials", "16", "an integer"),
        ("n_trials", 0, "an integer >= 1"),
        ("seed", 1.5, "an integer"),
        ("timeout", "soon", "a number > 0"),
        ("storage", 5, "a non-empty string"),
        ("task.epochs", True, "an integer"),
        ("task.options", 3, "a table"),
        ("task.options", {"when": {"x": 1}}, "task option 'when'"),
        ("space.d_model", 64, "a non-empty list of integers"),
        ("space.d_model", [64, "x"], "a non-empty list of integers"),
        ("space.heads", [0, 2], "integers >= 1"),
        ("space.min_dk", "8", "an integer >= 1 or a list"),
        ("space.mlp_ratio", 4.0, "a non-empty list of numbers"),
        ("space.lr", "fast", "a number > 0"),
        ("space.lr", [1e-3], "[low, high]"),
        ("space.dropout", 1.5, "a number in [0, 1)"),
        ("space.families", "uniform", "a non-empty list of names"),
        ("latency.threads", 1.0, "an integer"),
        ("latency.batch_size", -1, "an integer >= 1"),
        ("budgets.max_params", "big", "an integer"),
        ("budgets.max_latency_ms", 0, "a number > 0"),
        ("early_stopping.enabled", "yes", "true or false"),
        ("early_stopping.alpha", 1.5, "a number in [1e-06, 1)"),
        ("early_stopping.reduction", 1, "an integer >= 2"),
        ("finalists.seeds", 0, "an integer >= 1"),
        ("finalists.enabled", "no", "true or false"),
        ("objectives", ["accuracy"], "must be a table"),
    ],
)
def test_wrong_type_names_key_expected_and_got(path, value, expected):
    key = path.split(".")[-1]
    message = fails(with_(path, value), expected)
    assert f"'{key}'" in message or key in message


@pytest.mark.parametrize(
    "path",
    ["name", "n_trials", "task", "space", "task.name", "space.d_model", "space.n_layers", "space.heads"],
)
def test_missing_required_key(path):
    fails(with_(path, ...), "missing the required key", f"'{path.split('.')[-1]}'")


@pytest.mark.parametrize(
    ("path", "value", "fragments"),
    [
        ("sampler", "cmaes", ("'sampler'", "tpe, nsga2, gp, random")),
        ("space.families", ["uniform", "zigzag"], ("'zigzag'", "uniform, increasing")),
        ("space.d_model", [], ("'d_model'", "non-empty list")),
        ("space.families", [], ("'families'", "non-empty")),
        ("space.heads", [2, 2, 4], ("'heads'", "more than once")),
        ("task.name", "imagenet", ("'imagenet'", "digits, mnist, relations", ".npz", "file.py:function")),
        ("objectives.accuracy", "minimize", ("'accuracy'", "maximize")),
        ("objectives.latency", "maximize", ("'latency'", "minimize")),
        ("objectives.params", "maximize", ("'params'", "minimize")),
        ("latency.device", "tpu", ("'device'", "auto, cpu, cuda")),
        ("latency.dtype", "bfloat16", ("bfloat16", "cuda")),
        ("space.attention", "flash", ("'attention'", "fused, merged, serial")),
        ("space.lr", [1e-2, 1e-3], ("'lr'", "0 < low < high")),
        ("early_stopping.min_epochs", 4, ("min_epochs", "enabled = false")),
    ],
)
def test_bad_choices(path, value, fragments):
    fails(with_(path, value), *fragments)


def test_early_stopping_floor_is_fine_when_disabled():
    d = with_("early_stopping.min_epochs", 9)
    d["early_stopping"]["enabled"] = False
    assert not spec_from_dict(d).early_stopping.enabled


@pytest.mark.parametrize(
    ("space", "fragments"),
    [
        (
            {"d_model": [64], "heads": [3, 5], "min_dk": 8},
            ("no head count", "divides any d_model", "lower min_dk"),
        ),
        ({"d_model": [32], "heads": [1, 2, 4], "min_dk": 64}, ("no head count", "d_k >= 64")),
        ({"families": ["free"], "n_layers": [2]}, ("family 'free'", "3+ layers", "drop 'free'")),
        ({"families": ["uniform", "free"], "n_layers": [2]}, ("family 'free'",)),
        ({"families": ["increasing"], "heads": [1], "d_model": [32]}, ("family 'increasing'", "2+ valid")),
        ({"heads": [1, 2, 4, 16]}, ("head count 16", "never valid", "remove it")),
        ({"families": ["free"], "n_layers": [2, 3]}, ("n_layers 2", "add 'uniform'")),
        ({"d_model": [30, 64], "heads": [4, 8], "families": ["uniform"]}, ("d_model 30", "remove 30")),
        ({"min_dk": [8, 64], "d_model": [64], "families": ["increasing"]}, ("min_dk 64", "lower it")),
    ],
)
def test_impossible_space_names_the_problem_and_fix(space, fragments):
    d = base()
    d["space"].update(space)
    fails(d, *fragments)


@pytest.mark.parametrize("name", [".hidden", "a/b", "a b", "x" * 65, "../up", "naïve"])
def test_bad_study_name(name):
    fails(with_("name", name), "name", "invalid", "letters, digits")


def test_empty_name():
    fails(with_("name", ""), "'name'", "non-empty string")


def test_families_default_to_the_realisable_ones_but_listing_one_is_strict():
    d = with_("space.n_layers", [1, 2])
    assert spec_from_dict(d).space.families == ("uniform", "increasing", "decreasing")
    d["space"]["families"] = ["uniform", "free"]
    fails(d, "family 'free'")


def test_round_trip_through_json():
    for d in (base(), with_("space.lr", [1e-4, 1e-2])):
        d["objectives"]["params"] = "minimize"
        d["space"].update(min_dk=[4, 8], mlp_ratio=[4, 2], families=["free", "uniform"])
        spec = spec_from_dict(d)
        stored = json.loads(json.dumps(spec.to_dict()))  # what Optuna's user attrs hold
        again = spec_from_dict(stored)
        assert again == spec
        assert again.to_dict() == stored
    assert spec.space.mlp_ratio == (2.0, 4.0) and spec.space.families == ("uniform", "free")


def test_to_dict_is_canonical():
    a = spec_from_dict(base())
    d = base()
    d["space"]["d_model"] = [64, 32]
    d["space"]["min_dk"] = [8]
    assert spec_from_dict(d).to_dict() == a.to_dict()


def test_input_dict_is_not_mutated():
    d = base()
    before = copy.deepcopy(d)
    spec_from_dict(d)
    assert d == before


def test_spec_stored_with_a_study_leaves_the_storage_url_out():
    d = base()
    d["storage"] = "postgresql+psycopg://user:secret@db/explorer"
    spec = spec_from_dict(d)
    assert spec.storage == d["storage"] and "storage" not in spec.stored()
    assert "secret" not in json.dumps(spec.stored())
    assert spec_from_dict(spec.stored()) == spec_from_dict({**spec.stored()})


def test_early_stopping_rungs():
    spec = spec_from_dict(base())  # 4 epochs, min_epochs 2, reduction 2
    assert spec.early_stopping.rungs(4) == (2,) and spec.early_stopping.rungs(12) == (2, 4, 8)
    assert spec_from_dict(with_("early_stopping.enabled", False)).early_stopping.rungs(12) == ()
    d = base()
    del d["early_stopping"]
    d["task"]["epochs"] = 3  # the default first rung (3) leaves no rung: not an error when not asked for
    assert spec_from_dict(d).early_stopping.rungs(3) == ()


def test_load_spec_from_file(tmp_path):
    path = tmp_path / "s.toml"
    path.write_text(
        'name = "file-spec"\nn_trials = 3\n[task]\nname = "relations"\noptions = { n_relations = 2 }\nepochs = 3\n'
        "[space]\nd_model = [32]\nn_layers = [2]\nheads = [1, 2, 4]\nmin_dk = 8\nlr = [1e-4, 1e-2]\n"
    )
    spec = load_spec(path)
    assert isinstance(spec, StudySpec)
    assert spec.task.options == {"n_relations": 2} and spec.space.lr == (1e-4, 1e-2)


def test_toml_syntax_error_gives_the_line(tmp_path):
    path = tmp_path / "bad.toml"
    path.write_text('name = "x"\nn_trials = 3\n[space\nd_model = [32]\n')
    with pytest.raises(SpecError, match=r"not valid TOML.*line 3"):
        load_spec(path)


def test_missing_file(tmp_path):
    with pytest.raises(SpecError, match="no spec file"):
        load_spec(tmp_path / "nope.toml")


def test_unknown_key_in_a_file(tmp_path):
    path = tmp_path / "typo.toml"
    path.write_text(Path(STUDIES / "quickstart.toml").read_text().replace("min_dk =", "mindk ="))
    with pytest.raises(
        SpecError, match=r"unknown key 'mindk' in \[space\]; did you mean 'min_dk'\? the allowed"
    ):
        load_spec(path)


def test_committed_specs_exist():
    names = {p.relative_to(ROOT).as_posix() for p in COMMITTED}
    assert {
        "studies/quickstart.toml",
        "studies/digits-long.toml",
        "studies/gpu-vit.toml",
        "studies/relations.toml",
    } <= names
    assert "examples/vit/vit.toml" in names


# the checkpoint a [model] pretrained example names, and the example script that trains it (not committed)
EXAMPLE_CHECKPOINTS = {
    "checkpoints/llama-text": "examples/pretrained/train_llama.py",
    "checkpoints/bert-relations": "examples/pretrained/train_bert.py",
}


def _overrides(path: Path, tmp_path: Path) -> list[str]:
    """For an example that starts from a trained checkpoint this clone does not hold, the checkpoint its script
    saves after one step, named by an override (the spec reads the checkpoint's sizes)."""
    named = read_spec_file(path).get("model", {}).get("pretrained")
    if named is None or (ROOT / named).is_dir():
        return []
    pytest.importorskip("transformers")
    out = tmp_path / "checkpoint"
    subprocess.run(
        [sys.executable, EXAMPLE_CHECKPOINTS[named], "--out", str(out), "--steps", "1"],
        cwd=ROOT,
        check=True,
        capture_output=True,
        timeout=300,
    )
    return [f'model.pretrained="{out}"']


@pytest.mark.parametrize("path", COMMITTED, ids=lambda p: p.relative_to(ROOT).as_posix())
def test_committed_specs_load_and_round_trip(path, tmp_path):
    spec = load_spec(path, _overrides(path, tmp_path))
    if path.parent == STUDIES:  # studies/NAME.toml stores its study as NAME (studies/NAME.db by default)
        assert spec.name == path.stem
    assert spec_from_dict(json.loads(json.dumps(spec.to_dict()))) == spec


def test_committed_specs_say_what_they_promise():
    quick = load_spec(STUDIES / "quickstart.toml")
    assert quick.task.name == "digits" and quick.latency.device == "cpu" and quick.early_stopping.enabled
    # "how many heads for my model": one width and one depth, heads searched, finalists cross-validated on
    # 5 folds or more, the answer's margin stated
    assert len(quick.space.d_model) == 1 and len(quick.space.n_layers) == 1 and len(quick.space.heads) >= 5
    assert quick.finalists.enabled and quick.finalists.units >= 5 and quick.finalists.folds >= 5
    assert quick.finalists.references and quick.answer.margin == 1.0
    # its grid's horizon is the one where longer runs stop changing the comparisons; the second example asks the
    # same question of the same model at the horizon that still gains
    assert quick.finalists.horizon_by == "comparison" and quick.finalists.pilot
    long = load_spec(STUDIES / "digits-long.toml")
    assert long.finalists.horizon_by == "gain"
    assert (long.space, long.task, long.answer) == (quick.space, quick.task, quick.answer)
    # the ladder: every head count of the space at the base, so re-runs compare the same layouts
    assert quick.finalists.ladder
    bad = quick.to_dict() | {"finalists": quick.to_dict()["finalists"] | {"ladder": "yes"}}
    with pytest.raises(SpecError, match="ladder"):
        spec_from_dict(bad)
    gpu = load_spec(STUDIES / "gpu-vit.toml")
    assert gpu.latency.device == "cuda" and gpu.latency.dtype == "bfloat16" and max(gpu.space.d_model) >= 256
    rel = load_spec(STUDIES / "relations.toml")
    assert (
        rel.task.name == "relations"
        and rel.task.options["n_relations"] == 4
        and rel.space.heads == (1, 2, 4, 8)
        and not rel.early_stopping.enabled
    )


# --------------------------------------------------------------------------------------------- modern heads


def text_spec() -> dict[str, Any]:
    """A valid language-model spec searching key/value heads, with every new key."""
    return {
        "name": "lm",
        "n_trials": 6,
        "objectives": {"bpb": "minimize", "latency": "minimize", "decode": "minimize"},
        "task": {"name": "text", "options": {"context": 32, "max_bytes": 20000}, "epochs": 2},
        "space": {
            "d_model": [64],
            "n_layers": [2],
            "heads": [2, 4, 8],
            "kv_heads": [1, 2, 4],
            "head_dim": [16, 32],
            "kv_per_layer": True,
            "families": ["uniform"],
        },
        "decode": {"context": 256, "batch_size": 2},
        "budgets": {"max_decode_ms": 5.0, "max_kv_cache_mb": 1.5},
    }


def text_with(path: str, value: Any) -> dict[str, Any]:
    d = text_spec()
    *tables, key = path.split(".")
    target = d
    for t in tables:
        target = target.setdefault(t, {})
    if value is ...:
        del target[key]
    else:
        target[key] = value
    return d


def test_a_language_model_spec_minimizes_bits_per_byte_and_decoding():
    spec = spec_from_dict(text_spec())
    assert spec.task.kind == "language_model" and spec.metric.name == "val_bpb"
    assert spec.objective_names() == ["bpb", "latency", "decode"]
    assert spec.directions() == ["minimize", "minimize", "minimize"]
    assert (spec.decode.context, spec.decode.batch_size) == (256, 2)
    assert spec.space.kv_heads == (1, 2, 4) and spec.space.head_dim == (16, 32) and spec.space.kv_per_layer
    assert (spec.budgets.max_decode_ms, spec.budgets.max_kv_cache_mb) == (5.0, 1.5)
    assert spec_from_dict(json.loads(json.dumps(spec.to_dict()))) == spec
    assert "accuracy" not in spec.to_dict()["objectives"]


def test_a_classification_spec_is_stored_as_before():
    spec = spec_from_dict(base())
    assert spec.objective_names() == ["accuracy", "latency"] and spec.directions() == ["maximize", "minimize"]
    stored = spec.to_dict()
    assert stored["objectives"] == {"accuracy": "maximize", "latency": "minimize"} and "decode" not in stored
    assert "kv_heads" not in stored["space"] and "head_dim" not in stored["space"]


def test_a_decoding_budget_alone_measures_decoding_at_the_defaults():
    d = text_with("decode", ...)
    d["objectives"].pop("decode")
    spec = spec_from_dict(d)
    assert (spec.decode.context, spec.decode.batch_size) == (512, 1)
    d["budgets"] = {}
    assert spec_from_dict(d).decode is None  # nothing asks for decoding: it is not measured


@pytest.mark.parametrize(
    ("data", "fragments"),
    [
        (text_with("space.kv_heads", [3]), ["kv_heads 3 divides no head count", "heads % kv_heads"]),
        (
            text_with("space.kv_heads", [2, 4])
            | {"space": {**text_spec()["space"], "heads": [3, 4], "kv_heads": [2, 4]}},
            ["head count 3 has no key/value head count in kv_heads [2, 4]", "add one of 1, 3"],
        ),
        (text_with("space.kv_heads", [0, 1]), ["'kv_heads' in [space]", "integers >= 1"]),
        (text_with("space.kv_heads", [1, 1]), ["'kv_heads' in [space] lists 1 more than once"]),
        (text_with("space.kv_per_layer", "yes"), ["'kv_per_layer' in [space]", "true or false"]),
        (text_with("space.kv_heads", ...), ["'kv_per_layer' in [space] needs kv_heads"]),
        (
            text_with("space.head_dim", [8])
            | {"space": {**text_spec()["space"], "head_dim": [8], "min_dk": 16}},
            ["head_dim", "below the d_k floor", "min_dk"],
        ),
        (text_with("space.head_dim", 0), ["'head_dim' in [space]", "an integer >= 1"]),
        (text_with("decode.context", 0), ["'context' in [decode]", "an integer >= 1"]),
        (text_with("decode.batch_size", 1.5), ["'batch_size' in [decode]", "an integer >= 1"]),
        (text_with("decode.window", 3), ["unknown key 'window' in [decode]", "context, batch_size"]),
        (text_with("objectives.decode", "maximize"), ["'decode' in [objectives]", "minimize"]),
        (
            text_with("objectives.accuracy", "maximize"),
            ["'accuracy' in [objectives] does not fit task 'text'", "bits per byte", 'bpb = "minimize"'],
        ),
        (text_with("objectives.bpb", "maximize"), ["'bpb' in [objectives]", "minimize"]),
        (text_with("budgets.max_decode_ms", -1), ["'max_decode_ms' in [budgets]", "a number > 0"]),
        (text_with("budgets.max_kv_cache_mb", "big"), ["'max_kv_cache_mb' in [budgets]", "a number > 0"]),
        (
            with_("objectives.bpb", "minimize"),
            ["'bpb' in [objectives] does not fit task 'digits'", "accuracy"],
        ),
        (with_("objectives.decode", "minimize"), ["'decode' in [objectives] needs a language-model task"]),
        (with_("budgets.max_decode_ms", 2.0), ["'max_decode_ms' in [budgets] needs a language-model task"]),
        (
            with_("budgets.max_kv_cache_mb", 2.0),
            ["'max_kv_cache_mb' in [budgets] needs a language-model task"],
        ),
        (base() | {"decode": {"context": 64}}, ["[decode] needs a language-model task", "'digits'"]),
    ],
    ids=lambda x: x if isinstance(x, str) else None,
)
def test_every_new_key_refuses_bad_input_in_one_line(data, fragments):
    fails(data, *fragments)


def test_the_task_kinds_a_spec_knows_are_the_tasks_own():
    from explorer.data import load_task
    from explorer.data._registry import TASKS
    from explorer.spec._goals import TASK_KINDS

    assert set(TASK_KINDS) == set(TASKS)
    small = {"text": {"context": 16, "max_bytes": 20000}, "relations": {"n_samples": 200}}
    for name, kind in TASK_KINDS.items():
        assert load_task(name, **small.get(name, {})).kind == kind, name


# --- each key declared once: the fields, the generic reader, the key list --------------------------------------


@dataclass(frozen=True, kw_only=True)
class Probe:
    """A made-up table: one key of each kind the generic reader reads from its field alone."""

    count: int = key(2, "a count", lo=0)
    share: float = key(0.5, "a share", lo=0.0, hi=1.0)
    rate: float | None = key(None, "a rate")  # no limits: > 0
    mode: str = key("a", "a mode", choices=("a", "b"))
    sizes: tuple[int, ...] = key((1,), "sizes", scalar=True)
    on: bool = key(True, "a switch")
    name: str = key(doc="required")


@pytest.mark.parametrize(
    ("table", "expected"),
    [
        ({"name": "x", "count": -1}, "'count' in [probe] must be an integer >= 0, got an integer (-1)."),
        ({"name": "x", "share": 1.0}, "'share' in [probe] must be a number in [0, 1), got a number (1.0)."),
        ({"name": "x", "rate": 0}, "'rate' in [probe] must be a number > 0, got an integer (0)."),
        ({"name": "x", "mode": "c"}, "'mode' in [probe] is 'c'; choose one of a, b."),
        ({"name": "x", "on": 1}, "'on' in [probe] must be true or false, got an integer (1)."),
        ({"name": "x", "sizes": [2, 2]}, "'sizes' in [probe] lists 2 more than once; list each value once."),
        ({"count": 1}, "[probe] is missing the required key 'name'; add it (see studies/quickstart.toml)."),
        (
            {"name": "x", "cont": 1},
            "unknown key 'cont' in [probe]; did you mean 'count'? the allowed keys are "
            "count, share, rate, mode, sizes, on, name.",
        ),
        (
            {"name": "x", "zzz": 1},
            "unknown key 'zzz' in [probe]; the allowed keys are count, share, rate, mode, sizes, on, name.",
        ),
    ],
)
def test_the_generic_reader_checks_each_key_by_its_field(table, expected):
    with pytest.raises(SpecError) as caught:
        read_table(Probe, table, "[probe]")
    assert str(caught.value) == expected


def test_the_generic_reader_fills_defaults_and_takes_given_values():
    assert read_table(Probe, {"name": "x"}, "[probe]") == Probe(name="x")
    read = read_table(Probe, {"name": "x", "sizes": 4, "share": 0, "rate": 2}, "[probe]", mode="b")
    assert read == Probe(name="x", sizes=(4,), share=0.0, rate=2.0, mode="b")
    assert isinstance(read.share, float)


def test_a_spec_without_a_key_reads_its_fields_default():
    spec = spec_from_dict(
        {
            "name": "d",
            "n_trials": 1,
            "task": {"name": "digits"},
            "space": {"d_model": [16], "n_layers": [1], "heads": [1, 2]},
        }
    )
    checked = 0
    for table, cls in [("", StudySpec), *TABLE_CLASSES.items()]:
        read = getattr(spec, table) if table else spec
        for field in spec_fields(cls):
            given = default_of(field) is REQUIRED or key_of(field).table
            if read is None or given or key_of(field).shown is not None:  # shown: worked out by the reader
                continue
            assert getattr(read, field.name) == default_of(field), f"{table or 'top level'}.{field.name}"
            checked += 1
    assert checked > 40


def test_every_key_has_one_line_of_documentation():
    for table, cls in [("", StudySpec), *TABLE_CLASSES.items()]:
        for field in spec_fields(cls):
            doc = key_of(field).doc
            assert key_of(field).table or (doc and "\n" not in doc), f"{table or 'top level'}.{field.name}"
    assert SPEC_KEYS["space"][:4] == ("d_model", "n_layers", "heads", "min_dk")  # in the fields' order


def test_the_settled_edge_defaults_to_half_the_margin_and_stays_inside_it():
    a = spec_from_dict(base()).answer
    assert a.edge_for(True) == pytest.approx(0.0025) and a.settle_for(True) == pytest.approx(0.005)
    wide = spec_from_dict(with_("answer", {"edge": 0.8})).answer
    assert wide.settle_for(True) == pytest.approx(0.008)  # never narrower than the edge
    assert spec_from_dict(with_("answer", {"settle": 0.3})).answer.settle_for(True) == pytest.approx(0.003)
    assert spec_from_dict(with_("answer", {"edge": 0})).answer.settle_for(True) == 0.0  # no zone asked: none
    fails(with_("answer", {"settle": 1.0}), "'settle'", "below the margin")
    fails(with_("answer", {"settle": -1}), "'settle'", ">= 0")
