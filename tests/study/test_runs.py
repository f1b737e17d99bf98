"""`explorer.run_study` is the one path a spec takes to a finished study: `explorer study run` calls it with its
progress bars, and a library caller gets the same checks, totals and timeout."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from explorer import api
from explorer.cli import main
from explorer.errors import ConfigError
from tests.fixtures import write_tiny_spec


def _with_total(spec: Path, total: int) -> None:
    text = spec.read_text()
    spec.write_text(text.replace("n_trials = 1\n", f"n_trials = {total}\n", 1))
    assert f"n_trials = {total}\n" in spec.read_text()


def test_the_study_run_command_goes_through_run_study(tmp_path, monkeypatch):
    calls: list[dict[str, Any]] = []
    real = api.run_study

    def spy(*args: Any, **kwargs: Any) -> Any:
        calls.append(kwargs)
        return real(*args, **kwargs)

    monkeypatch.setattr(api, "run_study", spy)
    spec = write_tiny_spec(tmp_path, n_trials=1, epochs=1)
    url = f"sqlite:///{tmp_path / 's.db'}"
    result = CliRunner().invoke(main, ["study", "run", str(spec), "--storage", url, "--device", "cpu"])
    assert result.exit_code == 0, result.output
    assert len(calls) == 1
    assert calls[0]["spec_path"] == str(spec)
    assert {"on_start", "on_stage", "on_progress"} <= set(calls[0])
    assert "study 'tiny' in" in result.output  # the bars named the study once on_start gave them its handle


def test_on_start_gets_the_open_study_and_the_file_total_wins_with_a_notice(tmp_path):
    spec = write_tiny_spec(tmp_path, n_trials=1, epochs=1)
    url = f"sqlite:///{tmp_path / 's.db'}"
    started: list[tuple[str, str]] = []
    summary = api.run_study(spec, url, on_start=lambda h, notice: started.append((h.name, notice)))
    assert summary.search.done == 1 and started == [("tiny", "")]
    _with_total(spec, 2)
    summary = api.run_study(spec, url, on_start=lambda h, notice: started.append((h.name, notice)))
    assert summary.search.done == 2
    assert started[1][0] == "tiny" and "n_trials = 2 (it was 1)" in started[1][1]


def test_a_total_below_the_finished_trials_is_refused_before_on_start(tmp_path):
    spec = write_tiny_spec(tmp_path, n_trials=2, epochs=1)
    url = f"sqlite:///{tmp_path / 's.db'}"
    api.run_study(spec, url)
    started: list[Any] = []
    with pytest.raises(ConfigError, match="n_trials"):
        api.run_study(spec, url, n_trials=1, total_from="n_trials", on_start=lambda h, n: started.append(h))
    assert started == []


def test_a_run_is_complete_when_every_stage_reached_its_total_without_stopping_short():
    import typing

    from explorer.study import RunSummary, StopReason

    progress = typing.get_type_hints(RunSummary)["search"]  # the stage progress a summary holds
    done = progress("search", 4, 4, 0, 0, 0, 8, 0.9)
    assert RunSummary(done, None, None, 0).complete
    assert not RunSummary(dataclasses.replace(done, done=3), None, None, 0).complete
    short = dataclasses.replace(done, stage="finalist", reason=StopReason.EXHAUSTED)
    assert not RunSummary(done, short, None, 2).complete
