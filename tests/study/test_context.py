"""One process of a study run resolves its device, loads its task and builds its search space once, and hands
them to the bench, the worker, the objective, every trial and the re-timing (explorer.study._context)."""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import Any

import pytest
from click.testing import CliRunner

import explorer.data._registry as tasks_module
import explorer.measure._device as device_module
from explorer import api
from explorer.cli import main
from explorer.spec import SearchSpace
from tests.fixtures import write_tiny_spec


def count_calls(monkeypatch: pytest.MonkeyPatch, name: str, original: Callable[..., Any]) -> list[tuple]:
    """Wrap ``original`` wherever an explorer module holds it under ``name``; return the list of its calls."""
    calls: list[tuple] = []

    def counting(*args: Any, **kwargs: Any) -> Any:
        calls.append(args)
        return original(*args, **kwargs)

    for module in list(sys.modules.values()):
        if module.__name__.startswith("explorer") and getattr(module, name, None) is original:
            monkeypatch.setattr(module, name, counting)
    return calls


@pytest.fixture
def counts(monkeypatch: pytest.MonkeyPatch) -> dict[str, list]:
    spaces: list[tuple] = []
    build = SearchSpace.__init__

    def counting_init(self: SearchSpace, *args: Any, **kwargs: Any) -> None:
        spaces.append(args)
        build(self, *args, **kwargs)

    monkeypatch.setattr(SearchSpace, "__init__", counting_init)
    return {
        "device": count_calls(monkeypatch, "resolve_device", device_module.resolve_device),
        "task": count_calls(monkeypatch, "load_task", tasks_module.load_task),
        "space": spaces,
    }


FEW_FINALISTS = "ladder = false\ntiming_rounds = 1\n"  # appended to the tiny spec's [finalists]


def test_a_run_resolves_its_device_loads_its_task_and_builds_its_space_once(tmp_path, counts, one_thread):
    """The whole run in this process: checks, the attention bench, the search, the finalists and their re-timing
    (its rounds run in processes of their own)."""
    spec = write_tiny_spec(tmp_path, n_trials=3, epochs=1, finalists=True, bench=True, extra=FEW_FINALISTS)
    summary = api.run_study(spec, f"sqlite:///{tmp_path / 's.db'}")
    assert summary.search.done == 3 and summary.finalists is not None and summary.finalists.done > 0
    assert (len(counts["device"]), len(counts["task"]), len(counts["space"])) == (1, 1, 1)


@pytest.mark.slow
def test_a_study_run_command_with_a_device_resolves_it_once(tmp_path, counts, one_thread):
    """`explorer study run SPEC --device cpu`: the run's plan resolves the named device once, and that is the
    run's device; resuming the study from its database alone resolves everything once more."""
    spec = write_tiny_spec(tmp_path, n_trials=2, epochs=1, extra=FEW_FINALISTS)
    url = f"sqlite:///{tmp_path / 's.db'}"
    result = CliRunner().invoke(main, ["study", "run", str(spec), "--storage", url, "--device", "cpu"])
    assert result.exit_code == 0, result.output
    assert (len(counts["device"]), len(counts["task"]), len(counts["space"])) == (1, 1, 1)
    result = CliRunner().invoke(main, ["study", "resume", "tiny", "--storage", url, "--n-trials", "3"])
    assert result.exit_code == 0, result.output
    assert (len(counts["device"]), len(counts["task"]), len(counts["space"])) == (2, 2, 2)
