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
    spec = write_tiny_spec(tmp_path, study_name, n_trials=4, epochs=2, finalists=True, extra="start = 2\n")
    weights = {"EXPLORER_ARTIFACTS": str(tmp_path / "artifacts")}  # the runs' weights, not in the checkout
    built = CliRunner().invoke(main, ["study", "run", str(spec), "--storage", postgres_url], env=weights)
    assert built.exit_code == 0, built.stderr
    # the stage's budget (2 runs a layout) trains every layout on the first 2 units and leaves the answer open
    assert not explorer.recommend(study_name, postgres_url).decided
    first = _finalist_runs(study_name, postgres_url)
    _, results = confirm(
        postgres_url, study_name, 12, explorer_env(tmp_path / "cache", **weights), commands=2
    )
    found = audit(postgres_url, study_name, "two", 0.0, results)
    assert found.runs > first  # the commands ran rounds of their own
    # each round queued once: the commands together queued only what the study holds beyond its first runs
    queued = sum(doc["finalist_runs_queued"] for _, doc in results)
    # a run queued twice would close as a duplicate, not a record
    assert queued == _finalist_runs(study_name, postgres_url) - first, results
    assert found.twice == 0  # no (layout, seed, horizon) finished twice
    # every layout on the grid's first units; every later unit run by several layouts
    assert found.paired, found.units
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


def _finalist_runs(name: str, url: str) -> int:
    """The study's finalist runs (finished, failed or queued; duplicates closed without running left out)."""
    return sum(r.role == "finalist" for r in explorer.load(name, url).records)
