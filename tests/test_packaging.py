"""Packaging and conventions: declared dependencies, a lazy public API, the package logger, EXPLORER_STORAGE,
exit codes, --json everywhere, shell completion, --no-bench, and one-line errors that leave the disk alone."""

from __future__ import annotations

import ast
import json
import logging
import os
import re
import subprocess
import sys
from pathlib import Path

import click
import optuna
import pytest
import tomllib
from click.testing import CliRunner

import explorer.errors as errors
from explorer.cli import main
from tests.deploy_helpers import write_tiny_spec

ROOT = Path(__file__).resolve().parents[1]
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())
DISTRIBUTION = {
    "sklearn": "scikit-learn",
    "google": "google-cloud-storage",
    "yaml": "pyyaml",
    "mlflow": "mlflow-skinny",
    "optuna_dashboard": "optuna-dashboard",
}


def requirement_names(reqs: list[str]) -> set[str]:
    return {re.split(r"[\s<>=!~;\[]", r, maxsplit=1)[0].lower() for r in reqs}


def direct_imports() -> dict[str, set[str]]:
    """Top-level third-party modules imported anywhere in explorer/, with the files that import them."""
    found: dict[str, set[str]] = {}
    for path in (ROOT / "explorer").rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names = [node.module]
            else:
                continue
            for name in names:
                top = name.split(".")[0]
                if top not in sys.stdlib_module_names and top != "explorer":
                    found.setdefault(top, set()).add(path.name)
    return found


def run_python(
    code: str, cwd: Path, env: dict | None = None, timeout: float = 120
) -> subprocess.CompletedProcess:
    full = {**os.environ, "PYTHONPATH": str(ROOT), **(env or {})}
    return subprocess.run(
        [sys.executable, "-c", code], cwd=cwd, env=full, capture_output=True, text=True, timeout=timeout
    )


@pytest.fixture(scope="module")
def study(tmp_path_factory):
    """A 2-trial study run through the CLI with --no-bench although its spec asks for the bench."""
    folder = tmp_path_factory.mktemp("packaging")
    url = f"sqlite:///{folder / 'tiny.db'}"
    spec = write_tiny_spec(folder, bench=True)
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("EXPLORER_HEARTBEAT_INTERVAL", "1")
        result = CliRunner().invoke(
            main, ["study", "run", str(spec), "--storage", url, "--no-bench", "--json"]
        )
    assert result.exit_code == 0, result.output
    return url, folder, json.loads(result.stdout)


def test_every_direct_import_is_declared():
    deps = requirement_names(PYPROJECT["project"]["dependencies"])
    extras = {
        n for reqs in PYPROJECT["project"]["optional-dependencies"].values() for n in requirement_names(reqs)
    }
    for module, files in direct_imports().items():
        dist = DISTRIBUTION.get(module, module).lower()
        assert dist in deps | extras, (
            f"{module} (imported in {sorted(files)}) is not declared in pyproject.toml"
        )
    for module in ("numpy", "scipy", "sqlalchemy", "matplotlib", "torch", "optuna", "pandas", "seaborn"):
        assert module in deps  # imported directly by the core, so required, not optional
    assert {"onnx", "onnxruntime", "onnxscript"} <= requirement_names(
        PYPROJECT["project"]["optional-dependencies"]["onnx"]
    )


def test_torch_floor_is_the_first_release_with_out_of_memory_error():
    (torch_req,) = [r for r in PYPROJECT["project"]["dependencies"] if r.startswith("torch")]
    floor = tuple(int(x) for x in re.search(r">=\s*(\d+)\.(\d+)", torch_req).groups())
    assert floor >= (2, 5), torch_req  # torch.OutOfMemoryError and torch.onnx.export(dynamo=True)
    source = "\n".join(p.read_text() for p in (ROOT / "explorer").rglob("*.py"))
    assert "torch.OutOfMemoryError" in source  # the reason for the floor is still in use


def test_readme_install_line_uses_the_cpu_index_and_ci_keeps_the_local_wheel():
    readme = (ROOT / "README.md").read_text()
    assert "pip install torch --index-url https://download.pytorch.org/whl/cpu" in readme
    assert "install -q 'torch==2.13.0'" in (ROOT / ".ci" / "run").read_text()


def test_import_explorer_is_lazy_and_exposes_the_workflows(tmp_path):
    code = (
        "import sys, explorer\n"
        "assert not {'torch', 'optuna', 'pandas'} & set(sys.modules), sorted(sys.modules)\n"
        "print(sorted(explorer.__all__))\n"
    )
    done = run_python(code, tmp_path)
    assert done.returncode == 0, done.stderr
    names = set(json.loads(done.stdout.replace("'", '"')))
    assert {"run_study", "trials", "recommend", "export", "report", "heads", "compare"} <= names


def test_import_explorer_api_loads_only_what_it_needs(tmp_path):
    """Importing the workflows module loads no torch, Optuna or pandas and none of explorer's packages' modules:
    each workflow imports what it uses when called; the study's workflows and train come from their packages on
    first use."""
    code = (
        "import sys, explorer.api as api\n"
        "loaded = sorted(m for m in sys.modules if m.startswith('explorer'))\n"
        "assert not {'torch', 'optuna', 'pandas'} & set(sys.modules), sorted(sys.modules)\n"
        "print(loaded)\n"
        "from explorer.measure import train_variant\n"
        "from explorer.study import confirm, run, run_study, RunSummary\n"
        "assert (api.train, api.run, api.run_study, api.confirm, api.RunSummary) == "
        "(train_variant, run, run_study, confirm, RunSummary)\n"
        "assert all(callable(getattr(api, n)) for n in api.__all__)\n"
    )
    done = run_python(code, tmp_path)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout.replace("'", '"')) == [
        "explorer",
        "explorer.api",
        "explorer.errors",
        "explorer.meta",
    ]


@pytest.mark.slow
def test_python_api_runs_a_two_trial_study_and_returns_a_dataframe(tmp_path):
    write_tiny_spec(tmp_path)
    code = (
        "import explorer\n"
        "summary = explorer.run_study('tiny.toml')\n"
        "df = explorer.trials('tiny')\n"
        "assert type(df).__name__ == 'DataFrame', type(df)\n"
        "print(summary.complete, len(df), sorted(df['state'].unique()), df['heads'].tolist())\n"
    )
    done = run_python(code, tmp_path, {"EXPLORER_HEARTBEAT_INTERVAL": "1"}, timeout=300)
    assert done.returncode == 0, done.stderr
    complete, rows, *_ = done.stdout.split(" ", 2)
    assert (complete, rows) == ("True", "2") and (tmp_path / "studies" / "tiny.db").is_file()


def test_no_bench_skips_the_attention_bench(study):
    url, _, doc = study
    handle = optuna.load_study(study_name="tiny", storage=url)
    assert doc["complete"] and doc["search"]["done"] == 2
    assert "bench" not in handle.user_attrs  # the spec asked for it; --no-bench skipped it
    for command in (["study", "run"], ["study", "resume"]):
        assert "--no-bench" in CliRunner().invoke(main, [*command, "--help"]).output


def test_verbose_shows_explorer_steps_only(study):
    url, _, _ = study
    root_level = logging.getLogger().level
    result = CliRunner().invoke(
        main, ["-v", "export", "tiny", "--storage", url, "--format", "state", "--out", "/dev/null/x.pt"]
    )
    assert result.exit_code == errors.EXIT_BAD_INPUT  # the path fails, but the flag has been applied
    assert logging.getLogger("explorer").isEnabledFor(logging.DEBUG)
    assert logging.getLogger().level == root_level  # the root logger is left alone ...
    assert not logging.getLogger("matplotlib").isEnabledFor(logging.DEBUG)  # ... so third parties stay quiet
    assert "Traceback" in result.stderr and result.stderr.rstrip().endswith("choose another path.")
    CliRunner().invoke(main, ["space", "--d-model", "8"])  # the next call without -v turns it off again
    assert not logging.getLogger("explorer").isEnabledFor(logging.INFO)


@pytest.mark.slow
def test_verbose_output_has_explorer_lines_and_no_third_party_debug(study, tmp_path):
    url, _, _ = study
    code = (
        "from explorer.cli import main\n"
        f"main(['-v', 'export', 'tiny', '--storage', {url!r}, '--format', 'state', '--out', 'k.pt'])\n"
    )
    done = run_python(code, tmp_path)
    assert done.returncode == 0, done.stderr
    lines = done.stderr.strip().splitlines()
    assert any("explorer.output._export: exporting trial" in line for line in lines)
    assert any("explorer.study._retrain: loaded the weights" in line for line in lines)
    assert not any("matplotlib" in line or "PIL" in line for line in lines), lines


def test_storage_comes_from_explorer_storage_everywhere(study, tmp_path, monkeypatch):
    url, _, _ = study
    monkeypatch.chdir(tmp_path)  # no studies/ here: only the variable can point at the study
    runner = CliRunner(env={"EXPLORER_STORAGE": url})
    listed = json.loads(runner.invoke(main, ["study", "list", "--json"]).stdout)
    assert [r["name"] for r in listed] == ["tiny"]
    status = runner.invoke(main, ["study", "status", "tiny", "--json"])
    assert status.exit_code == 0 and json.loads(status.stdout)["total"] == 2
    exported = runner.invoke(main, ["export", "tiny", "--out", str(tmp_path / "k.json"), "--json"])
    assert exported.exit_code == 0, exported.output
    for command in iter_commands(main):
        if any(p.name == "storage" for p in command.params):
            option = next(p for p in command.params if p.name == "storage")
            assert "EXPLORER_STORAGE" in (option.help or ""), command.name


def test_a_password_in_explorer_storage_is_never_printed(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    secret = "s3cr3t-pw"
    runner = CliRunner(env={"EXPLORER_STORAGE": f"postgresql+psycopg://u:{secret}@127.0.0.1:1/db"})
    result = runner.invoke(main, ["study", "status", "tiny"])
    assert result.exit_code == errors.EXIT_ENVIRONMENT and result.stderr.count("\n") == 1
    assert secret not in result.output and "***" in result.stderr
    assert list(tmp_path.iterdir()) == []


def test_malformed_heartbeat_interval_is_one_line_and_creates_nothing(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    spec = write_tiny_spec(tmp_path)
    result = CliRunner(env={"EXPLORER_HEARTBEAT_INTERVAL": "ten"}).invoke(main, ["study", "run", str(spec)])
    assert result.exit_code == errors.EXIT_BAD_INPUT
    assert result.stderr.count("\n") == 1 and "EXPLORER_HEARTBEAT_INTERVAL='ten'" in result.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["tiny.toml"]


def test_interrupt_is_one_line_and_exit_130(monkeypatch):
    import explorer.api

    def interrupted(*a, **k):
        raise KeyboardInterrupt

    monkeypatch.setattr(explorer.api, "export", interrupted)
    monkeypatch.setattr("explorer.cli._cmd_results.check_readable", lambda *a: None)  # no study needed
    result = CliRunner().invoke(main, ["export", "tiny", "--out", "x.json"])
    assert result.exit_code == errors.EXIT_INTERRUPTED == 130
    assert result.stderr.startswith("interrupted") and result.stderr.count("\n") == 1


def iter_commands(group: click.Group):
    for command in group.commands.values():
        if isinstance(command, click.Group):
            yield from iter_commands(command)
        else:
            yield command


def test_every_command_has_json_and_help():
    runner = CliRunner()
    for command in iter_commands(main):
        assert any(p.name == "as_json" for p in command.params), f"{command.name} has no --json"
    for args in (["--help"], ["bench", "model", "--help"], ["compare", "--help"], ["export", "--help"]):
        assert runner.invoke(main, args).exit_code == 0


def test_exit_codes_are_distinct_and_documented():
    codes = {
        errors.ConfigError: 3,
        errors.SpecError: 3,
        errors.DataError: 3,
        errors.StudyNotFoundError: 3,
        errors.StorageError: 3,
        errors.NoCompletedTrialsError: 4,
        errors.TrainingDivergedError: 4,
        errors.ExportMismatchError: 4,
        errors.MissingExtraError: 5,
        errors.DeviceError: 5,
        errors.StorageUnavailableError: 5,
        errors.RuntimeUnavailableError: 5,
        errors.ExplorerError: 1,
    }
    for kind, code in codes.items():
        assert kind.exit_code == code, kind
    cli_page = (ROOT / "docs" / "cli.md").read_text()  # the command line's reference page
    table = dict(re.findall(r"^\| (\d+) \| ([^|]+) \|$", cli_page, flags=re.M))
    assert {"0", "1", "2", "3", "4", "5", "130"} <= set(table)
    assert "usage" in table["2"] and "bad input" in table["3"] and "no result" in table["4"]
    assert "environment" in table["5"] and "interrupted" in table["130"]


def test_shell_completion_is_clicks_and_documented():
    result = CliRunner().invoke(main, [], prog_name="explorer", env={"_EXPLORER_COMPLETE": "bash_source"})
    assert result.exit_code == 0 and "_EXPLORER_COMPLETE=bash_complete" in result.output
    assert "_EXPLORER_COMPLETE=bash_source explorer" in (ROOT / "docs" / "cli.md").read_text()


def test_read_only_commands_import_no_torch(study, tmp_path):
    url, _, _ = study
    code = (
        "import sys\n"
        "from click.testing import CliRunner\n"
        "from explorer.cli import main\n"
        f"for args in (['study', 'list', '--storage', {url!r}], ['study', 'status', 'tiny', '--storage', {url!r}]):\n"
        "    assert CliRunner().invoke(main, args).exit_code == 0\n"
        "print(sorted(m for m in ('torch', 'scipy.stats', 'seaborn', 'pandas') if m in sys.modules))\n"
    )
    done = run_python(code, tmp_path)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"


@pytest.mark.postgres
def test_postgres_password_from_pgpassword_not_argv(postgres_url, tmp_path, monkeypatch):
    """A URL without a password works when libpq's PGPASSWORD holds it (psycopg reads it), so the password is
    in neither argv nor EXPLORER_STORAGE."""
    from sqlalchemy.engine import URL, make_url

    url = make_url(postgres_url.replace("postgresql://", "postgresql+psycopg://", 1))
    parts = (url.drivername, url.username, None, url.host, url.port, url.database, url.query)
    bare = URL.create(*parts).render_as_string(hide_password=False)
    assert url.password and url.password not in bare
    monkeypatch.chdir(tmp_path)
    ok = CliRunner(env={"PGPASSWORD": url.password}).invoke(
        main, ["study", "list", "--storage", bare, "--json"]
    )
    assert ok.exit_code == 0, ok.output
    assert isinstance(json.loads(ok.stdout), list)
    denied = CliRunner(env={"PGPASSWORD": "wrong-password"}).invoke(
        main, ["study", "list", "--storage", bare]
    )
    assert denied.exit_code == errors.EXIT_ENVIRONMENT and "wrong-password" not in denied.output


# The public API of ``import explorer``: adding or removing a name is a decision, made here and in the docs.
PUBLIC_API = {
    "__version__",
    *("run_study", "trials", "recommend", "export", "report", "heads", "compare", "confirm", "load"),
    *("RunOptions", "MultiHeadAttention", "ModelConfig", "InputSpec"),
}


def test_all_is_the_documented_public_api():
    import explorer

    assert len(explorer.__all__) == len(set(explorer.__all__))  # no name listed twice
    assert set(explorer.__all__) == PUBLIC_API
    assert dir(explorer) == sorted(PUBLIC_API)
    with pytest.raises(AttributeError, match="no attribute 'nonexistent'"):
        _ = explorer.nonexistent
    # help(explorer) names every public name as explorer.NAME (and its submodules as :mod:`explorer.NAME`)
    named = set(re.findall(r"explorer\.(\w+)\b(?![.\w])", explorer.__doc__))
    submodules = {
        n for n in named if (ROOT / "explorer" / f"{n}.py").is_file() or (ROOT / "explorer" / n).is_dir()
    }
    assert named - submodules == PUBLIC_API - {"__version__"}


def test_every_public_name_is_the_object_its_defining_module_holds():
    import importlib
    from importlib.metadata import version

    import explorer
    import explorer.api

    for name in sorted(PUBLIC_API - {"__version__"}):
        obj = getattr(explorer, name)
        # the lazy table names the surface it comes through (a package, or explorer.api), not a private module;
        # the surface exports it, the package defines it, and it is the object its defining module holds
        surface = explorer._LAZY[name]
        assert surface == "explorer.api" or surface.count(".") == 1, (name, surface)
        assert name in importlib.import_module(surface).__all__, (name, surface)
        assert obj is getattr(importlib.import_module(surface), name), name
        assert obj.__module__ == surface or obj.__module__.startswith(f"{surface}._"), (name, obj.__module__)
        assert obj is getattr(importlib.import_module(obj.__module__), name), name
        if obj.__module__ == "explorer.api":
            assert name in explorer.api.__all__, name
    assert explorer.__version__ == version("explorer")


def test_console_script_is_the_cli_main():
    from importlib.metadata import entry_points

    import explorer.cli

    assert PYPROJECT["project"]["scripts"] == {"explorer": "explorer.cli:main"}
    (installed,) = entry_points(group="console_scripts", name="explorer")
    assert installed.value == "explorer.cli:main"  # the installed metadata agrees with pyproject.toml
    assert installed.load() is explorer.cli.main


def test_python_dash_m_explorer_is_the_same_command_line(tmp_path):
    done = subprocess.run(
        [sys.executable, "-m", "explorer", "--help"],
        cwd=tmp_path,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("Usage: explorer ")  # prog_name is explorer, not __main__.py
    commands = done.stdout.split("Commands:")[1].split("Exit codes:")[0]  # the exit codes follow them
    listed = re.findall(r"^  (\S+)", commands, flags=re.M)
    assert listed == sorted(main.commands)  # the same group as the console script
