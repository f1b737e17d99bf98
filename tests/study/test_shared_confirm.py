"""Two `explorer confirm --until-decided` commands on one PostgreSQL study share its rounds (as on two machines)."""

from __future__ import annotations

import pytest
from click.testing import CliRunner

import explorer
from benchmarks.common import explorer_env
from benchmarks.shared_confirm import audit, confirm
from explorer.cli import main
from tests.fixtures import write_tiny_spec


@pytest.mark.postgres
@pytest.mark.slow
def test_two_confirm_commands_share_one_study(tmp_path, postgres_url, study_name):
    spec = write_tiny_spec(
        tmp_path, study_name, n_trials=4, epochs=2, finalists=True, extra="start = 2\nbudget = 8\n"
    )
    built = CliRunner().invoke(main, ["study", "run", str(spec), "--storage", postgres_url])
    assert built.exit_code == 0, built.stderr
    assert not explorer.recommend(study_name, postgres_url).decided  # the stage's 8 runs leave it open
    _, results = confirm(postgres_url, study_name, 12, explorer_env(tmp_path / "cache"), commands=2)
    found = audit(postgres_url, study_name, "two", 0.0, results)
    assert found.runs > 8  # the commands ran rounds of their own
    # each round queued once: the commands together queued only what the study holds beyond its first runs
    queued = sum(doc["finalist_runs_queued"] for _, doc in results)
    finalists = [r for r in explorer.load(study_name, postgres_url).records if r.role == "finalist"]
    assert queued == len(finalists) - 8, results  # a run queued twice closes as a duplicate, not a record
    assert found.twice == 0  # no (layout, seed, horizon) finished twice
    assert found.paired  # every layout on the grid's first units; every later unit run by several layouts
    assert found.summary  # the last command's summary counts the runs the storage holds
    for code, doc in results:
        finals = doc["finalists"]
        # exit 6 only where this command neither queued nor joined a round and the stage stopped undecided
        undecided = finals["reason"] in ("budget", "minutes", "horizon")
        idle = doc["finalist_runs_queued"] == 0 and doc["finalist_rounds_joined"] == 0
        assert code == (6 if idle and undecided else 0), doc
        # a command that ended decided agrees with the answer every command reads
        if finals["reason"] is None:
            assert found.decided
