"""Every command that names the answer names the same layout: the report, `explorer.recommend`, `export` (as
answer and as its old name knee), `heads`' choice of trial, `compare` and their --json, on one
study with and without re-timings stored (the re-timings can change which layout is fastest)."""

from __future__ import annotations

import json

import numpy as np
import pytest
from click.testing import CliRunner

import explorer
from explorer.answer import resolve_trial
from explorer.cli import main
from explorer.storage import RETIMED_ATTR, load_records, load_retimings
from tests.fixtures import latency, make_study


def _retime(study, factor: dict[str, float]) -> None:
    """Store three re-timing rounds of every finalist layout, its time scaled by ``factor[key]``."""
    records = [r for r in load_records(study) if r.role == "finalist" and r.finished]
    keys = {r.key: r.latency.median_ms for r in records}
    rows = []
    for rnd in range(3):
        for key, ms in keys.items():
            lat = latency(ms * factor.get(key, 1.0) * (1 + 0.01 * rnd), when=f"2025-01-02T12:0{rnd}:00+00:00")
            rows.append(
                {"key": key, "round": rnd, "latency": lat.to_dict(), "kind": "forward", "pid": 100 + rnd}
            )
    study.set_user_attr(RETIMED_ATTR, rows)


def _names_everywhere(url: str, name: str, tmp_path) -> set[tuple[int, ...]]:
    run = CliRunner()
    heads = set()
    ans = explorer.recommend(name, url)
    heads.add(ans.recommended.heads)
    report = run.invoke(
        main,
        [
            "report",
            name,
            "--storage",
            url,
            "--out",
            str(tmp_path / "r"),
            "--force",
            "--json",
            "--no-artifacts",
        ],
    )
    assert report.exit_code == 0, report.output
    heads.add(tuple(json.loads(report.stdout)["answer"]["answer"]["heads"]))
    md = (tmp_path / "r" / "report.md").read_text()
    heads.add(tuple(int(h) for h in md.split("**Use ", 1)[1].split(" heads", 1)[0].split(",")))
    for which in ("answer", "knee"):
        out = tmp_path / f"{which}.json"
        exported = run.invoke(
            main, ["export", name, "--storage", url, "--trial", which, "--out", str(out), "--json"]
        )
        assert exported.exit_code == 0, exported.output
        doc = json.loads(exported.stdout)
        heads.add(tuple(doc["heads"]))
        heads.add(tuple(doc["answer"]["answer"]["heads"]))
    data = explorer.load(name, url)
    heads.add(resolve_trial(data.records, data.study.spec, "answer", data.retimings).heads)  # what heads uses
    return heads


@pytest.mark.parametrize("retimed", [False, True], ids=["own timings", "re-timed"])
def test_every_command_names_the_same_layout(tmp_path, retimed):
    url = f"sqlite:///{tmp_path / 'one.db'}"
    study = make_study(40, storage=url, name="one", finalists=6, noise=0.002)
    if retimed:
        records = [r for r in load_records(study) if r.role == "finalist"]
        fastest = min(records, key=lambda r: r.latency.median_ms).key
        _retime(study, {fastest: 3.0})  # the layout fastest by its own timings is slowest once re-timed
    assert bool(load_retimings(study)) == retimed
    named = _names_everywhere(url, "one", tmp_path)
    assert len(named) == 1, named
    other = make_study(30, storage=url, name="two", finalists=6, seed=3, noise=0.002)
    assert other is not None
    compared = CliRunner().invoke(
        main, ["compare", "one", "two", "--storage", url, "--out", str(tmp_path / "cmp"), "--json"]
    )
    assert compared.exit_code == 0, compared.output
    assert tuple(json.loads(compared.stdout)["answers"]["one"]["answer"]["heads"]) in named


def test_retimings_change_the_answer_for_every_command_alike(tmp_path):
    """The same study before and after re-timing: when the re-timing reorders the class's members by speed,
    every command follows it (none keeps the answer computed from the runs' own timings)."""
    url = f"sqlite:///{tmp_path / 'one.db'}"
    study = make_study(40, storage=url, name="one", finalists=6, noise=0.002)
    before = explorer.recommend("one", url)
    members = before.members
    if len(members) < 2:
        pytest.skip("this synthetic study's class has one member: re-timing cannot reorder it")
    _retime(study, {before.recommended.key: 5.0})
    after = _names_everywhere(url, "one", tmp_path)
    assert after == {explorer.recommend("one", url).recommended.heads} != {before.recommended.heads}
    assert np.isfinite(explorer.recommend("one", url).confidence)
