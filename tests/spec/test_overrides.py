"""Spec overrides from the command line (--set) and the resolved spec (explorer spec show)."""

from __future__ import annotations

import json

import optuna
import pytest
from click.testing import CliRunner

from explorer.cli import main
from explorer.errors import SpecError
from explorer.spec import load_spec, spec_rows
from explorer.spec._overrides import parse_override
from tests.fixtures import make_study, write_tiny_spec


def test_overrides_are_read_as_toml_and_checked_as_the_file_is(tmp_path):
    path = write_tiny_spec(tmp_path)
    spec = load_spec(path, ["space.heads=[1, 2]", "finalists.folds=3", "sampler=random", "task.options.x=1"])
    assert spec.space.heads == (1, 2)
    assert spec.finalists.folds == 3
    assert spec.sampler == "random"
    assert spec.task.options == {"x": 1}
    sources = dict(spec.origin)
    assert sources["space.heads"] == "override" and sources["space.d_model"] == "file"
    rows = {r["key"]: r for r in spec_rows(spec.to_dict(), sources)}
    assert rows["finalists.folds"] == {"key": "finalists.folds", "value": 3, "source": "override"}
    assert rows["latency.runtime"] == {"key": "latency.runtime", "value": "eager", "source": "default"}
    assert rows["n_trials"]["source"] == "file"
    assert load_spec(path) == load_spec(path, ["space.heads=[4, 2, 1]", "space.heads=[1, 2, 4]"])  # last wins


@pytest.mark.parametrize(
    ("given", "says"),
    [
        (
            "space.hedas=[1]",
            "unknown key 'hedas' in [space] (--set space.hedas=[1]); the keys of [space] are d_model",
        ),
        ("spce.heads=[1]", "unknown table 'spce' in --set spce.heads=[1]; the tables are objectives"),
        ("sampler=foo", "--set sampler=foo: 'sampler' in the top level is 'foo'; choose one of tpe, nsga2"),
        ("finalists.folds=0", "--set finalists.folds=0: 'folds' in [finalists] must be an integer >= 1"),
        ("seed=-1", "--set seed=-1: 'seed' at the top level is -1"),
        ("space.heads=[1, 2", "is not a TOML value"),
        ("space", "is not KEY=VALUE"),
        ("space=[1]", "sets the whole [space] table"),
        ("space.heads.x=1", "goes deeper than TABLE.KEY"),
        ("n_trials=1\nseed=2", "is not a TOML value"),
        ("tracking.mlflow=http://me:secret@127.0.0.1:5000", "holds a password"),
    ],
)
def test_a_bad_override_is_one_line_naming_the_key_and_the_choices(tmp_path, given, says):
    with pytest.raises(SpecError) as err:
        load_spec(write_tiny_spec(tmp_path), [given])
    assert says in str(err.value)
    assert "\n" not in str(err.value).replace(given, "")


def test_a_bare_word_is_a_string_and_toml_wins_where_it_parses():
    assert parse_override("sampler=random").value == "random"
    assert parse_override("task.name=data.py:load").value == "data.py:load"
    assert parse_override("bench=true").value is True
    assert parse_override("space.lr=3e-3").value == 0.003


def test_spec_show_prints_every_key_with_its_source_and_creates_nothing(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    write_tiny_spec(tmp_path)
    before = sorted(p.name for p in tmp_path.iterdir())
    out = CliRunner().invoke(main, ["spec", "show", "tiny.toml", "--set", "finalists.folds=3", "--json"])
    assert out.exit_code == 0, out.output
    doc = json.loads(out.stdout)
    rows = {r["key"]: r for r in doc["keys"]}
    assert rows["finalists.folds"]["source"] == "override" and rows["finalists.folds"]["value"] == 3
    assert rows["space.heads"]["source"] == "file" and rows["answer.margin"]["source"] == "default"
    assert doc["spec"]["finalists"]["folds"] == 3
    text = CliRunner().invoke(main, ["spec", "show", "tiny.toml"])
    assert text.exit_code == 0 and "finalists.folds" in text.stdout
    bad = CliRunner().invoke(main, ["spec", "show", "tiny.toml", "--set", "space.hedas=1"])
    assert bad.exit_code == 3 and bad.output.count("\n") == 1 and "hedas" in bad.output
    missing = CliRunner().invoke(main, ["spec", "show", "nosuch"])
    assert missing.exit_code != 0 and "no study 'nosuch'" in missing.output
    assert sorted(p.name for p in tmp_path.iterdir()) == before  # no studies/ folder, no database


def test_spec_show_never_prints_a_storage_password(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    write_tiny_spec(tmp_path)
    url = "postgresql+psycopg://me:secret@127.0.0.1/db"
    for args in (["--json"], []):
        out = CliRunner().invoke(main, ["spec", "show", "tiny.toml", "--set", f'storage="{url}"', *args])
        assert out.exit_code == 0 and "secret" not in out.output and "me:***@127.0.0.1" in out.output
    bad = CliRunner().invoke(
        main, ["spec", "show", "tiny.toml", "--set", f"storage={url}", "--set", "seed=-1"]
    )
    assert bad.exit_code == 3 and "secret" not in bad.output
    bad = CliRunner().invoke(main, ["spec", "show", "tiny.toml", "--set", f"storage=[{url}"])
    assert bad.exit_code == 3 and "secret" not in bad.output and "is not a TOML value" in bad.output


def test_study_run_refuses_a_bad_override_before_anything_is_created(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    write_tiny_spec(tmp_path)
    out = CliRunner().invoke(main, ["study", "run", "tiny.toml", "--set", "finalists.folds=zero"])
    assert out.exit_code == 3 and "folds" in out.output and out.output.count("\n") == 1
    assert not (tmp_path / "studies").exists()


def test_spec_show_of_a_stored_study_reads_it_and_says_what_it_cannot_show(tmp_path):
    url = f"sqlite:///{tmp_path / 's.db'}"
    make_study(4, storage=url, name="old")
    mtime = (tmp_path / "s.db").stat().st_mtime_ns
    out = CliRunner().invoke(main, ["spec", "show", "old", "--storage", url, "--json"])
    assert out.exit_code == 0, out.output
    doc = json.loads(out.stdout)
    assert not doc["sources_recorded"] and {r["source"] for r in doc["keys"]} == {"stored", "derived"}
    assert {r["key"] for r in doc["keys"] if r["source"] == "derived"} <= {
        "storage",
        "artifacts",
        "finalists.budget",
        "latency.seq_len",
    }
    assert (tmp_path / "s.db").stat().st_mtime_ns == mtime
    refused = CliRunner().invoke(main, ["spec", "show", "old", "--storage", url, "--set", "seed=1"])
    assert refused.exit_code != 0 and "stored study" in refused.output


@pytest.mark.slow
def test_an_override_is_stored_with_the_study_so_a_resume_and_spec_show_see_it(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    write_tiny_spec(tmp_path, n_trials=1, epochs=1)
    sets = ["space.heads=[2]", "space.d_model=[16]", "space.n_layers=[1]", 'space.families=["uniform"]']
    run = ["study", "run", "tiny.toml", "--no-bench", *(a for s in sets for a in ("--set", s))]
    out = CliRunner().invoke(main, [*run, "--json"])
    assert out.exit_code == 0, out.output
    study = optuna.load_study(study_name="tiny", storage="sqlite:///studies/tiny.db")
    assert study.user_attrs["spec"]["space"]["heads"] == [2]
    assert study.user_attrs["spec_sources"]["space.heads"] == "override"
    shown = json.loads(CliRunner().invoke(main, ["spec", "show", "tiny", "--json"]).stdout)
    assert {r["key"]: r["source"] for r in shown["keys"]}["space.d_model"] == "override"
    # the file alone means another study now: refused, naming the difference; with the same --set it resumes
    again = CliRunner().invoke(main, ["study", "run", "tiny.toml", "--no-bench"])
    assert again.exit_code == 3 and "[space] d_model is [16] stored, [16, 32] in the file" in again.output
    assert CliRunner().invoke(main, [*run, "--json"]).exit_code == 0
