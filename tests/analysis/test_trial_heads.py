"""explorer.analysis._trial_heads: the heads of one trial analysed from its stored weights (nothing retrained,
nothing written)."""

from __future__ import annotations

import dataclasses

import optuna
import pytest
import torch

from explorer.analysis import REDUNDANT, TOLERANCE, HeadsAnalysis, HeadsReport, analyse_heads
from explorer.data import load_task
from explorer.model import build_model
from explorer.spec import load_spec
from explorer.study import store_for
from tests.fixtures import record, write_tiny_spec


def stored_trial(folder):
    """A tiny digits study's trial 0 with weights in its artifact store (built, not trained): (records, spec,
    storage URL, store)."""
    spec = load_spec(write_tiny_spec(folder))
    url = f"sqlite:///{folder / 'tiny.db'}"
    number = optuna.create_study(study_name=spec.name, storage=url).ask().number
    rec = dataclasses.replace(record(number, (2, 2), 0.8, 1.0, d_model=16), epochs_planned=1)
    torch.manual_seed(0)
    store = store_for(url, location=str(folder / "weights"))
    store.save(spec.name, number, build_model(rec.config, load_task("digits").spec))
    return [rec], spec, url, store


@pytest.fixture(scope="module")
def analysis(tmp_path_factory):
    folder = tmp_path_factory.mktemp("trial-heads")
    records, spec, url, store = stored_trial(folder)
    before = sorted(p.name for p in folder.iterdir())
    out = analyse_heads(records, spec, url, "0", torch.device("cpu"), store=store, n_examples=2)
    assert sorted(p.name for p in folder.iterdir()) == before  # the analysis writes nothing
    return out


def test_the_analysis_of_a_trial_holds_its_report_and_what_its_figures_draw(analysis):
    assert isinstance(analysis, HeadsAnalysis) and isinstance(analysis.report, HeadsReport)
    report = analysis.report
    assert report.trial == 0 and report.heads == (2, 2) and report.tolerance == TOLERANCE
    assert [len(v) for v in analysis.importance] == [2, 2] and len(analysis.example_maps) == 2
    assert all(0 <= n <= h for n, h in zip(report.heads_needed, report.heads, strict=True))


def test_the_report_lists_as_redundant_only_pairs_at_the_threshold_or_above(analysis):
    table, redundant = analysis.report.table, analysis.report.redundant
    # an untrained model's heads look alike
    assert len(redundant) and (redundant["similarity"] >= REDUNDANT).all()
    in_pairs = {(r.layer, h) for r in redundant.itertuples() for h in (r.head_a, r.head_b)}
    at_threshold = {(r.layer, r.head) for r in table.itertuples() if r.similarity_max >= REDUNDANT}
    assert in_pairs == at_threshold
