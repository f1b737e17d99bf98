"""The command line as a user meets it: help for every command, JSON on stdout, one-line errors."""

from __future__ import annotations

import json
import re
import sys
import types
from pathlib import Path

import click
import pytest
from click.testing import CliRunner

import explorer.errors as errors
from explorer.cli import main

ROOT = Path(__file__).resolve().parents[2]


def _commands(group: click.Group, prefix: tuple[str, ...] = ()) -> list[tuple[str, ...]]:
    out = []
    for name, cmd in group.commands.items():
        out.append((*prefix, name))
        if isinstance(cmd, click.Group):
            out.extend(_commands(cmd, (*prefix, name)))
    return out


ALL_COMMANDS = _commands(main)


def test_every_documented_command_exists():
    expected = {
        ("space",),
        ("train",),
        ("bench", "attention"),
        ("study", "run"),
        ("study", "resume"),
        ("study", "list"),
        ("study", "status"),
        ("report",),
        ("export",),
        ("confirm",),
        ("heads",),
        ("cache", "list"),
        ("cache", "clear"),
    }
    assert expected <= set(ALL_COMMANDS)


@pytest.mark.parametrize("path", [(), *ALL_COMMANDS], ids=lambda p: " ".join(p) or "explorer")
def test_help_for_every_command(path):
    result = CliRunner().invoke(main, [*path, "--help"])
    assert result.exit_code == 0, result.output
    assert "Usage:" in result.output
    # written for users: no note on the code behind it (Sphinx roles, double backquotes, the signature's length)
    assert not re.search(r":func:|:class:|``|click hands|signature", result.output), result.output


def test_the_top_help_lists_every_exit_code():
    text = CliRunner().invoke(main, ["--help"]).output
    listed = text[text.index("Exit codes:") :]
    codes = [errors.EXIT_FAILED, errors.EXIT_USAGE, errors.EXIT_BAD_INPUT, errors.EXIT_NO_RESULT]
    codes += [errors.EXIT_ENVIRONMENT, errors.EXIT_NOT_DECIDED, errors.EXIT_INTERRUPTED]
    found = [int(m) for m in re.findall(r"^\s+(\d+)\s", listed, re.MULTILINE)]
    assert found == [0, *codes]


@pytest.mark.parametrize(
    ("d_model", "min_dk", "heads"),
    [(512, 16, [1, 2, 4, 8, 16, 32]), (96, 16, [1, 2, 3, 4, 6])],
)
def test_space_json(d_model, min_dk, heads):
    result = CliRunner().invoke(main, ["space", "--d-model", str(d_model), "--min-dk", str(min_dk), "--json"])
    assert result.exit_code == 0
    doc = json.loads(result.stdout)
    assert doc == {"d_model": d_model, "min_dk": min_dk, "heads": heads, "d_k": [d_model // h for h in heads]}


# --- `train` and `space` take the spec's defaults --------------------------------------------------------------

# every option of `space` and `train` that is also a spec key: (the table's dataclass name, the key)
SHARED_WITH_THE_SPEC = {
    "--min-dk": ("SpaceSpec", "min_dk"),
    "--mlp-ratio": ("SpaceSpec", "mlp_ratio"),
    "--attention": ("SpaceSpec", "attention"),
    "--lr": ("SpaceSpec", "lr"),
    "--epochs": ("TaskSpec", "epochs"),
    "--batch-size": ("TaskSpec", "batch_size"),
    "--seed": ("StudySpec", "seed"),
    "--device": ("LatencyConfig", "device"),
    "--latency-batch": ("LatencyConfig", "batch_size"),
    "--latency-threads": ("LatencyConfig", "threads"),
    "--latency-runtime": ("LatencyConfig", "runtime"),
}
MINIMAL_SPEC = {
    "name": "defaults",
    "n_trials": 1,
    "task": {"name": "digits"},
    "space": {"d_model": [16], "n_layers": [1], "heads": [1, 2]},
}


def documented_defaults(text: str) -> dict[str, dict[str, str]]:
    """docs/spec.md's default column: section ("" for the top level) -> key -> the default as a value (backticks,
    quotes and the brackets of a one-value list taken off)."""
    out: dict[str, dict[str, str]] = {}
    section = None
    for line in text.splitlines():
        heading = re.match(r"^## (?:Top level|`\[(\w+)\]`)\s*$", line)
        if heading:
            section = heading.group(1) or ""
            out[section] = {}
        row = re.match(r"^\| `(\w+)` \| ([^|]+) \|", line)
        if row and section is not None:
            out[section][row.group(1)] = (
                row.group(2).strip().strip("`").strip('"').removeprefix("[").removesuffix("]")
            )
    return out


def spec_defaults_problems(docs: str) -> list[str]:
    """Where `train`/`space`'s option defaults, the spec's fields, a spec without the key and ``docs`` disagree."""
    from explorer.cli._cmd_model import SPEC_OPTIONS
    from explorer.fields import option_default
    from explorer.spec import spec_from_dict
    from explorer.spec._keys import TABLE_CLASSES

    problems = []
    if {flag: (cls.__name__, name) for flag, (cls, name) in SPEC_OPTIONS.items()} != SHARED_WITH_THE_SPEC:
        problems.append("SPEC_OPTIONS is not the set of options train and space share with the spec")
    spec = spec_from_dict(MINIMAL_SPEC)
    tables = {cls: name for name, cls in TABLE_CLASSES.items()}
    documented = documented_defaults(docs)
    for command in (main.commands["space"], main.commands["train"]):
        for param in command.params:
            flag = max(param.opts, key=len)
            if flag not in SPEC_OPTIONS:
                continue
            cls, name = SPEC_OPTIONS[flag]
            expected = option_default(cls, name)
            section = tables.get(cls, "")
            read = getattr(getattr(spec, section) if section else spec, name)
            read = read[0] if isinstance(read, tuple) else read
            where = f"{command.name} {flag}"
            if not (param.default == expected and param.show_default):
                problems.append(f"{where} defaults to {param.default!r}, the spec's field to {expected!r}")
            if read != expected:
                problems.append(f"{where}: a spec without {name} reads {read!r}, not {expected!r}")
            shown = documented.get(section, {}).get(name)
            if shown != str(expected):
                problems.append(f"{where}: docs/spec.md shows {shown!r} for {name}, not {expected!r}")
    return problems


def test_train_space_the_spec_and_its_reference_give_the_same_defaults():
    assert spec_defaults_problems((ROOT / "docs" / "spec.md").read_text()) == []
    help_text = " ".join(CliRunner().invoke(main, ["space", "--help"]).output.split())
    assert "--min-dk INTEGER Floor on d_k = d_model / heads. [default: 1]" in help_text


def test_the_defaults_check_can_fail():
    docs = (ROOT / "docs" / "spec.md").read_text()
    assert spec_defaults_problems(docs.replace("| `epochs` | `10` |", "| `epochs` | `15` |", 1)) == [
        "train --epochs: docs/spec.md shows '15' for epochs, not 10"
    ]


def test_bad_schedule_is_one_line_without_traceback():
    result = CliRunner().invoke(main, ["train", "--d-model", "64", "--heads", "uniform:5"])
    assert result.exit_code == 3  # bad input (2 is click's usage error)
    assert result.stdout == ""
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: 5 heads is not valid")
    assert "choose from 1, 2, 4, 8" in lines[0]
    assert "Traceback" not in result.stderr


def test_bad_task_option_syntax():
    result = CliRunner().invoke(main, ["train", "--task-opt", "n_relations"])
    assert result.exit_code == 3 and "not key=value" in result.stderr


def test_missing_config_file(tmp_path):
    result = CliRunner().invoke(main, ["train", "--config", str(tmp_path / "nope.json")])
    assert result.exit_code == 3 and "does not exist" in result.stderr


@pytest.mark.slow
def test_train_json_on_digits(tmp_path, monkeypatch):
    monkeypatch.setenv("EXPLORER_CACHE_DIR", str(tmp_path / "cache"))
    args = [
        "train",
        "--task",
        "digits",
        "--d-model",
        "32",
        "--layers",
        "2",
        "--heads",
        "increasing:2-4",
        "--min-dk",
        "8",
        "--epochs",
        "3",
        "--device",
        "cpu",
        "--json",
    ]
    result = CliRunner().invoke(main, args)
    assert result.exit_code == 0, result.stderr
    doc = json.loads(result.stdout)  # stdout is exactly one JSON document
    for key in (
        "val_accuracy",
        "test_accuracy",
        "latency_ms",
        "params",
        "heads",
        "d_k",
        "flops",
        "train_time_s",
    ):
        assert key in doc
    assert doc["heads"] == [2, 4] and doc["d_k"] == [16, 8]
    assert 0.3 < doc["val_accuracy"] <= 1.0  # 10 classes: chance is 0.1
    assert doc["latency_ms"] > 0 and doc["latency"]["batch_size"] == 32 and doc["latency"]["threads"] == 1
    # A second run of the same architecture reuses the cached latency (once it is one the cache trusts: on a
    # busy test machine the first figure may have been taken under load, and would rightly be measured again).
    _make_trusted(tmp_path / "cache", hours=0)
    again = json.loads(CliRunner().invoke(main, args).stdout)
    assert again["latency"]["cached"] is True and again["latency_ms"] == doc["latency_ms"]


def _make_trusted(cache_dir, hours: float) -> None:
    """Rewrite every cached latency as a clean measurement made ``hours`` ago on this idle machine."""
    import datetime as dt

    from explorer.measure._latency_cache import MachineState

    when = dt.datetime.now(dt.timezone.utc) - dt.timedelta(hours=hours)
    for path in cache_dir.glob("*.json"):
        doc = json.loads(path.read_text())
        r = doc["result"]
        r |= {"iqr_ms": 0.01 * r["median_ms"], "load": 0.0, "measured_at": when.isoformat(timespec="seconds")}
        doc["machine"] = {"cpus": MachineState.now().cpus, "load": 0.0, "runnable": 0}
        path.write_text(json.dumps(doc))


TINY_TRAIN = ["train", "--d-model", "16", "--layers", "1", "--heads", "2", "--epochs", "1", "--device", "cpu"]


def test_train_says_when_its_latency_came_from_the_cache_and_how_old_it_is(tmp_path, monkeypatch):
    monkeypatch.setenv("EXPLORER_CACHE_DIR", str(tmp_path / "cache"))
    first = CliRunner().invoke(main, [*TINY_TRAIN, "--latency-batch", "4"])
    assert first.exit_code == 0, first.stderr
    assert "from the cache" not in first.stdout
    _make_trusted(tmp_path / "cache", hours=3)
    second = CliRunner().invoke(main, [*TINY_TRAIN, "--latency-batch", "4"])
    assert second.exit_code == 0, second.stderr
    line = next(x for x in second.stdout.splitlines() if x.startswith("latency"))
    assert line.endswith("[from the cache, measured 3.0 h ago]"), line
    # Past the age limit the figure is measured again.
    monkeypatch.setenv("EXPLORER_CACHE_MAX_AGE", "0.1")
    third = CliRunner().invoke(main, [*TINY_TRAIN, "--latency-batch", "4"])
    assert third.exit_code == 0 and "from the cache" not in third.stdout


def _cache_files(directory) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(directory.iterdir())}


def test_cache_list_and_clear(tmp_path, monkeypatch):
    from explorer.measure import LatencyCache
    from explorer.measure._latency_cache import MachineState
    from tests.measure.test_latency_cache import ago, result

    cache_dir = tmp_path / "cache"
    monkeypatch.setenv("EXPLORER_CACHE_DIR", str(cache_dir))
    empty = CliRunner().invoke(main, ["cache", "list"])
    assert empty.exit_code == 0 and "no cached latencies" in empty.stdout
    cpus = MachineState.now().cpus
    store = LatencyCache(cache_dir, machine=lambda: MachineState(cpus, 0.0, 0))
    store.put("young", result(when=ago(hours=2), load=0.0))
    store.put("old", result(when=ago(days=5), load=0.0))
    store.put("loaded", result(when=ago(hours=1), load=8.0 * cpus))
    (cache_dir / "README.txt").write_text("not the cache's")

    doc = json.loads(CliRunner().invoke(main, ["cache", "list", "--json"]).stdout)
    rows = {r["key"]: r for r in doc["entries"]}
    assert list(rows) == ["old", "young", "loaded"]  # oldest first
    assert rows["young"]["reuse"] is True and rows["young"]["remeasure_because"] is None
    assert rows["loaded"]["reuse"] is False and "under load" in rows["loaded"]["remeasure_because"]
    assert 7100 < rows["young"]["age_s"] < 7300 and rows["old"]["machine"]["cpus"] == cpus
    text = CliRunner().invoke(main, ["cache", "list"]).stdout
    assert (
        "3 cached latencies" in text and "measured again when next asked: it was measured under load" in text
    )

    before = _cache_files(cache_dir)
    for bad in (["--older-than", "-1"], ["--older-than", "nan"], ["--older-than", "inf"]):
        res = CliRunner().invoke(main, ["cache", "clear", *bad])
        assert res.exit_code == 3 and len(res.stderr.strip().splitlines()) == 1, res.output
        assert "Traceback" not in res.stderr
    assert _cache_files(cache_dir) == before  # a rejected command changes nothing

    res = CliRunner().invoke(main, ["cache", "clear", "--older-than", "3"])
    assert res.exit_code == 0 and "removed 1 cached latencies older than 3 days" in res.stdout
    assert [e.key for e in store.entries()] == ["young", "loaded"]
    res = CliRunner().invoke(main, ["cache", "clear"])
    assert res.exit_code == 0 and "removed 2 cached latencies" in res.stdout
    assert sorted(p.name for p in cache_dir.iterdir()) == ["README.txt"]


def test_study_list_without_storage_scans_the_studies_folder(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    result = CliRunner().invoke(main, ["study", "list"])
    assert result.exit_code == 0 and "no studies in studies/*.db" in result.stdout
    import optuna

    (tmp_path / "studies").mkdir()
    for name in ("a", "b"):
        optuna.create_study(study_name=name, storage=f"sqlite:///studies/{name}.db")
    rows = json.loads(CliRunner().invoke(main, ["study", "list", "--json"]).stdout)
    assert [(r["name"], r["storage"]) for r in rows] == [
        ("a", "sqlite:///studies/a.db"),
        ("b", "sqlite:///studies/b.db"),
    ]


def test_space_without_a_valid_count_is_an_error_not_an_empty_list():
    result = CliRunner().invoke(main, ["space", "--d-model", "8", "--min-dk", "16", "--json"])
    assert result.exit_code != 0 and result.stdout == ""
    assert len(result.stderr.strip().splitlines()) == 1 and "lower --min-dk" in result.stderr


def _tree(root) -> dict[str, bytes | None]:
    """Every file and folder under ``root`` but the database (opening it may switch SQLite's journal mode)."""
    return {
        str(p.relative_to(root)): p.read_bytes() if p.is_file() else None
        for p in sorted(root.rglob("*"))
        if not p.name.startswith("s.db")
    }


@pytest.mark.parametrize(
    "args",
    [
        ["train", "--threads", "0"],
        ["heads", "ghost", "--threads", "0"],
        ["bench", "attention", "--threads", "0"],
        ["bench", "attention", "--min-run-time", "0"],
    ],
    ids=lambda a: " ".join(a[:2]),
)
def test_bad_numbers_are_one_line(args, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    result = CliRunner().invoke(main, args)
    assert result.exit_code != 0 and len(result.stderr.strip().splitlines()) == 1
    assert "Traceback" not in result.stderr and list(tmp_path.iterdir()) == []


def test_bench_out_into_an_unwritable_place_fails_before_running(tmp_path):
    (tmp_path / "file").write_text("x")
    result = CliRunner().invoke(main, ["bench", "attention", "--out", str(tmp_path / "file" / "b")])
    assert result.exit_code != 0 and "cannot write into --out" in result.stderr
    assert "timing attention" not in result.stderr  # refused before the benchmark ran


def test_bench_out_writes_its_files(tmp_path):
    args = [
        "bench",
        "attention",
        "--d-model",
        "16",
        "--heads",
        "2",
        "--seq-len",
        "4",
        "--batch",
        "1",
        "--device",
        "cpu",
        "--threads",
        "1",
        "--min-run-time",
        "0.02",
        "--out",
        str(tmp_path / "b"),
        "--json",
    ]
    result = CliRunner().invoke(main, args)
    assert result.exit_code == 0, result.stderr
    doc = json.loads(result.stdout)
    assert sorted(p.rsplit("/", 1)[-1] for p in doc["files"]) == ["bench.csv", "bench.png"]
    assert (tmp_path / "b" / "bench.png").read_bytes()[:4] == b"\x89PNG"


@pytest.mark.parametrize(
    "args",
    [
        ["report", "syn", "--out", "note.txt/report"],
        ["heads", "syn", "--out", "note.txt/heads"],
        ["heads", "syn", "--trial", "999", "--out", "new-heads"],
        ["export", "syn", "--out", "note.txt/config.json"],
        ["export", "syn", "--out", "note.txt"],  # replacing a file the user named is allowed ...
        [
            "bench",
            "attention",
            "--d-model",
            "32",
            "--heads",
            "2",
            "--seq-len",
            "8",
            "--out",
            "note.txt/bench",
        ],
    ],
    ids=lambda a: " ".join(a[:1] + a[-2:]),
)
def test_an_unusable_out_is_one_line_before_any_work_and_changes_nothing(tmp_path, monkeypatch, args):
    """An --out under a regular file (tests run as root, so a read-only folder would not stop them) used to give
    a raw traceback from `export`; `heads` with a bad trial left an empty --out folder behind."""
    from tests.fixtures import make_study

    monkeypatch.chdir(tmp_path)
    url = f"sqlite:///{tmp_path / 's.db'}"
    make_study(12, storage=url, name="syn")
    (tmp_path / "note.txt").write_text("mine")
    before = _tree(tmp_path)
    result = CliRunner().invoke(main, [*args, *(["--storage", url] if args[0] != "bench" else [])])
    if args[-1] == "note.txt":  # ... and is the one case here that succeeds
        assert result.exit_code == 0 and json.loads((tmp_path / "note.txt").read_text())["task"] == "digits"
        return
    assert result.exit_code == 3, result.output
    errors = [line for line in result.stderr.splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and "Traceback" not in result.stderr, result.stderr
    assert "note.txt" in errors[0] or "999" in errors[0]
    assert _tree(tmp_path) == before


@pytest.mark.parametrize(
    "args",
    [["study", "run", "--workers", "abc", "x.toml"], ["nope"], ["cache", "clear", "--older-than", "soon"]],
    ids=lambda a: " ".join(a[:2]),
)
def test_clicks_own_usage_errors_are_one_line_with_exit_code_2(args):
    result = CliRunner().invoke(main, args)
    assert result.exit_code == 2 and result.stdout == ""
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and "-h`" in lines[0], result.stderr


def test_the_bare_command_shows_its_help():
    result = CliRunner().invoke(main, [])
    assert result.exit_code == 0 and "Commands:" in result.stdout


TEXT_SPEC = """
name = "lm"
n_trials = 3
bench = false
objectives = {{ decode = "minimize" }}
task = {{ name = "text", epochs = 1, options = {{ context = 16, max_bytes = 20000 }} }}
[space]
d_model = [32]
n_layers = [1]
heads = [2, 4]
kv_heads = [1, 2]
{space}
[latency]
device = "cpu"
[decode]
context = 64
{decode}
[budgets]
{budgets}
"""

BAD_MODERN = {
    "kv_heads that divide no head count": ({"space": "kv_heads = [3]"}, "kv_heads 3 divides no head count"),
    "kv_heads not a list": ({"space": "kv_heads = 2"}, "'kv_heads' in [space]"),
    "kv_per_layer not a flag": ({"space": "kv_per_layer = 1"}, "'kv_per_layer' in [space]"),
    "head_dim below the floor": ({"space": "head_dim = [4]\nmin_dk = 8"}, "below the d_k floor"),
    "decode context zero": ({"decode": "batch_size = 0"}, "'batch_size' in [decode]"),
    "decode unknown key": ({"decode": "tokens = 5"}, "unknown key 'tokens' in [decode]"),
    "decoding budget negative": ({"budgets": "max_decode_ms = -2"}, "'max_decode_ms' in [budgets]"),
    "cache budget not a number": ({"budgets": 'max_kv_cache_mb = "1"'}, "'max_kv_cache_mb' in [budgets]"),
}


@pytest.mark.parametrize("case", BAD_MODERN, ids=list(BAD_MODERN))
def test_bad_modern_heads_keys_are_one_line_and_write_nothing(case, tmp_path, monkeypatch):
    """Every new spec key: one line naming it, a non-zero exit, no study database or folder created."""
    monkeypatch.chdir(tmp_path)
    parts, fragment = BAD_MODERN[case]
    # one key replaced at a time: a table's line stands in for the key of the same name in the template
    text = TEXT_SPEC.format(
        space=parts.get("space", ""), decode=parts.get("decode", ""), budgets=parts.get("budgets", "")
    )
    if "kv_heads = " in parts.get("space", ""):
        text = text.replace("kv_heads = [1, 2]\n", "", 1)
    if "batch_size" in parts.get("decode", ""):
        text = text.replace("[decode]\ncontext = 64", "[decode]")
    (tmp_path / "lm.toml").write_text(text)
    result = CliRunner().invoke(main, ["study", "run", "lm.toml"])
    assert result.exit_code != 0 and fragment in result.stderr, result.stderr
    assert len(result.stderr.strip().splitlines()) == 1 and "Traceback" not in result.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["lm.toml"]


def test_decoding_on_a_classification_task_is_one_line_and_writes_nothing(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    text = TEXT_SPEC.format(space="", decode="", budgets="").replace('name = "text"', 'name = "digits"')
    text = text.replace("options = { context = 16, max_bytes = 20000 }\n", "")
    (tmp_path / "lm.toml").write_text(text)
    result = CliRunner().invoke(main, ["study", "run", "lm.toml"])
    assert result.exit_code != 0 and "needs a language-model task" in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1
    assert sorted(p.name for p in tmp_path.iterdir()) == ["lm.toml"]


def _progress(done: int, total: int, stage: str = "search", to_decide: int | None = None):
    from explorer.study._progress import Progress

    return Progress(stage, done, total, 1, 0, 0, 3 * done, 0.5, to_decide=to_decide)


@pytest.mark.parametrize("terminal", [False, True], ids=["log", "terminal"])
def test_progress_is_a_bar_on_a_terminal_and_one_plain_line_a_stage_elsewhere(monkeypatch, capsys, terminal):
    from explorer.cli._common import ProgressBars

    monkeypatch.setattr(sys.stderr, "isatty", lambda: terminal)
    metric = types.SimpleNamespace(name="val_accuracy")
    bars = ProgressBars(as_json=False)
    bars.start(
        types.SimpleNamespace(
            name="q", masked_url="sqlite:///q.db", spec=types.SimpleNamespace(metric=metric)
        )
    )
    for stage, total in (("search", 4), ("finalist", 2)):
        bars.on_stage(stage, total)
        for done in range(total + 1):  # the finalists say what a decision needs after each round
            bars.on_progress(_progress(done, total, stage, None if stage == "search" else total - done))
    bars.close()
    err = capsys.readouterr().err
    if terminal:
        assert "\r" in err and "q search" in err  # tqdm redraws its bar in place
    else:
        assert "\r" not in err
        assert err.splitlines()[1:] == [
            "q search: 4/4 trials | 12 epochs | 1 running | best val 0.500 | pruned 0 | failed 0",
            "q finalists: 2 runs done of at most 2 | 6 epochs | 1 running | best val 0.500 | pruned 0 | failed 0 "
            "| decided",
        ]


@pytest.mark.parametrize("terminal", [False, True], ids=["log", "terminal"])
def test_finalists_decided_short_of_their_budget_end_as_decided_not_as_a_bar_stopped_part_way(
    monkeypatch, capsys, terminal
):
    """Their total is a budget the stage stops short of once the answer is decided: the last line says the runs
    done of at most that many, and decided; no share of the budget that reads as an aborted stage."""
    from explorer.cli._common import ProgressBars

    monkeypatch.setattr(sys.stderr, "isatty", lambda: terminal)
    metric = types.SimpleNamespace(name="val_accuracy")
    bars = ProgressBars(as_json=False)
    bars.start(
        types.SimpleNamespace(
            name="q", masked_url="sqlite:///q.db", spec=types.SimpleNamespace(metric=metric)
        )
    )
    bars.on_stage("finalist", 15)
    for done in range(7):
        bars.on_progress(_progress(done, 15, "finalist", 0 if done == 6 else 4))
    bars.close()
    err = capsys.readouterr().err
    last = err.replace("\r", "\n").strip().splitlines()[-1]
    assert "6 runs done of at most 15" in last and "| decided" in last, last
    assert "6/15" not in err and "40%" not in err


def test_off_a_terminal_the_finalist_stage_prints_a_line_a_round_with_what_deciding_costs(
    monkeypatch, capsys
):
    """A log (not a terminal) shows motion: each finished round is one line with the runs done, the comparisons
    still open and the forecast of what deciding costs (or that no affordable budget decides it)."""
    import dataclasses

    from explorer.cli._common import ProgressBars

    monkeypatch.setattr(sys.stderr, "isatty", lambda: False)
    metric = types.SimpleNamespace(name="val_accuracy")
    bars = ProgressBars(as_json=False)
    bars.start(
        types.SimpleNamespace(
            name="q", masked_url="sqlite:///q.db", spec=types.SimpleNamespace(metric=metric)
        )
    )
    bars.on_stage("finalist", 30)
    bars.on_progress(_progress(3, 30, "finalist"))  # a run finished inside a round: no line
    forecast = dict(
        median_to_decide=12, median_minutes=4.2, minutes_to_decide=7.0, decided_share=0.95, forecast_cap=240
    )
    bars.on_progress(
        dataclasses.replace(_progress(9, 30, "finalist", 20), open_comparisons=1, rounds=1, **forecast)
    )
    bars.on_progress(
        dataclasses.replace(_progress(9, 30, "finalist", 20), open_comparisons=1, rounds=1, **forecast)
    )
    unaffordable = dict(decided_share=0.4, forecast_cap=240)
    bars.on_progress(
        dataclasses.replace(_progress(13, 30, "finalist"), open_comparisons=2, rounds=2, **unaffordable)
    )
    bars.on_progress(dataclasses.replace(_progress(17, 30, "finalist", 0), open_comparisons=0, rounds=3))
    lines = capsys.readouterr().err.splitlines()[1:]
    assert lines == [
        "q finalists: round 1: 9 runs done | 1 comparison(s) open; a decision needs about 12 more runs, about 4 "
        "minutes (20 in 80% of simulated continuations of the stage, about 7 minutes)",
        "q finalists: round 2: 13 runs done | 2 comparison(s) open; no affordable budget decides it (40% of "
        "simulated continuations of the stage decided within 240 more runs)",
        "q finalists: round 3: 17 runs done | decided",
    ]


def test_the_timing_step_is_one_line_not_a_bar(monkeypatch, capsys):
    from explorer.cli._common import ProgressBars
    from explorer.study import Step

    monkeypatch.setattr(sys.stderr, "isatty", lambda: True)
    bars = ProgressBars(as_json=False)
    bars.start(types.SimpleNamespace(name="q", masked_url="sqlite:///q.db"))
    bars.on_stage(Step.TIMING, 6)
    bars.on_progress(_progress(1, 6))  # no bar to move
    bars.on_stage(Step.TIMING, 6)  # the rounds timed again (a busy machine): more of the same step
    bars.close()
    assert capsys.readouterr().err.splitlines() == [
        "study 'q' in sqlite:///q.db",
        "timing: 6 measurements in interleaved rounds, no training running",
        "timing: 6 more measurements in interleaved rounds, no training running",
    ]


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (["--trial", "99999"], "has no trial synth#99999"),
        (["--artifacts", "ftp://x"], "artifact location 'ftp://x' has an unknown scheme"),
    ],
    ids=["no-such-trial", "unknown-artifact-scheme"],
)
def test_export_refuses_a_missing_trial_and_a_bad_artifact_location_before_pytorch_loads(
    args: list[str], says: str, tmp_path: Path
) -> None:
    import subprocess

    from explorer.storage import open_storage
    from tests.fixtures import make_study

    url = f"sqlite:///{tmp_path / 'synth.db'}"
    storage = open_storage(url, heartbeat=False)
    make_study(5, storage=storage, name="synth")
    storage.engine.dispose()
    probe = (
        "import sys\n"
        "from explorer.cli import main\n"
        "try:\n"
        "    main(sys.argv[1:])\n"
        "except SystemExit as exc:\n"
        "    print('torch' in sys.modules, exc.code)\n"
    )
    command = ["export", "synth", "--storage", url, "--out", str(tmp_path / "x.json"), *args]
    proc = subprocess.run(
        [sys.executable, "-c", probe, *command], capture_output=True, text=True, cwd=ROOT, timeout=120
    )
    assert proc.stdout.split() == ["False", str(errors.EXIT_BAD_INPUT)], proc.stderr
    assert proc.stderr.count("\n") == 1 and says in proc.stderr and "Traceback" not in proc.stderr


def test_confirm_and_resume_default_to_the_workers_of_the_studys_last_run():
    """The command an answer line names runs at the pace it quotes: `--workers` left out takes the worker count
    the study's last run used (stored as WORKERS_ATTR); given, it wins."""
    from explorer.cli._common import workers_as_before
    from explorer.study import WORKERS_ATTR, RunOptions

    @click.command()
    @click.option("--workers", type=int, default=1)
    @click.option("--stored", type=int)
    def continue_study(workers: int, stored: int | None) -> None:
        study = types.SimpleNamespace(user_attrs={} if stored is None else {WORKERS_ATTR: stored})
        click.echo(workers_as_before(RunOptions(workers=workers), study).workers)

    def workers(*args: str) -> int:
        return int(CliRunner().invoke(continue_study, list(args)).output)

    assert workers("--stored", "2") == 2
    assert workers("--stored", "2", "--workers", "1") == 1  # given: kept
    assert workers() == 1  # nothing stored: the default
    assert workers("--stored", "100000") == 1  # above the limit now: the default stands


def test_json_gives_each_trial_number_with_the_label_people_read(tmp_path):
    """status and export --json name a trial by explorer's number (what --trial takes) and, beside it, as Optuna's
    tools and the report name it: NAME#4, NAME/finalists#12 (never 1,000,000,012 alone)."""
    from explorer.storage import FINALIST_BASE, trial_label
    from tests.fixtures import make_study

    url = f"sqlite:///{tmp_path / 's.db'}"
    make_study(12, storage=url, name="lab", finalists=3, apart=True)
    run = CliRunner()
    status = run.invoke(main, ["study", "status", "lab", "--storage", url, "--json"])
    assert status.exit_code == 0, status.output
    best = json.loads(status.stdout)["best"]
    assert best and all(r["trial"] == trial_label("lab", r["number"]) for r in best)
    assert any(r["number"] >= FINALIST_BASE and r["trial"].startswith("lab/finalists#") for r in best)
    out = tmp_path / "answer.json"
    exported = run.invoke(
        main, ["export", "lab", "--storage", url, "--trial", "answer", "--out", str(out), "--json"]
    )
    assert exported.exit_code == 0, exported.output
    doc = json.loads(exported.stdout)
    assert doc["trial"] >= FINALIST_BASE and doc["trial_label"] == trial_label("lab", doc["trial"])
    source = json.loads(out.read_text())["source"]
    assert source["trial"] == doc["trial"] and source["trial_label"] == doc["trial_label"]
