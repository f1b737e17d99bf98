"""The report's first screen: what to use, how sure, what it gains against the most accurate layout and what
deciding still costs, in at most 150 words before the first table; the statistics explained once, further
down; every count of finalist runs the same, each naming what it counts; a reproduce command with no folder of
the machine the study ran on."""

from __future__ import annotations

import dataclasses
import re

import pytest
from optuna.trial import TrialState

from explorer.answer import Evidence
from explorer.output import ReportInput, write_report
from tests.answer.test_horizon import LAYOUTS, SPEC as HORIZON_SPEC, grid_and_check
from tests.fixtures import LM_SPEC, lm_finalists, lm_search, make_study, record
from tests.output.test_report import BENCH, data_of

FIRST_SCREEN_WORDS = 150


def first_screen(md: str) -> str:
    """report.md up to its first table (a line that starts with ``|``)."""
    return re.split(r"^\|", md, maxsplit=1, flags=re.M)[0]


def words(text: str) -> int:
    """Every whitespace-separated word, the image's alt text and the figure's file name included."""
    return len(text.split())


def _horizon_data(long_gap: float) -> ReportInput:
    """A study without a pilot whose grid trained 10 units at 10 epochs and whose horizon check trained the
    deciding pair 3 units more at 20 (``long_gap``: how far 2,2 falls below 8,8 there)."""
    spec = dataclasses.replace(
        HORIZON_SPEC, finalists=dataclasses.replace(HORIZON_SPEC.finalists, pilot=False)
    )
    search = [record(100 + i, h, 0.9, lat) for i, (h, lat) in enumerate(LAYOUTS.items())]
    return ReportInput(spec, tuple(search + grid_and_check(0.004, long_gap, units=10)))


STUDIES = {
    "undecided": lambda: data_of(
        make_study(80, states={TrialState.FAIL: 3, TrialState.PRUNED: 5}, bench=BENCH, finalists=3),
        "sqlite:///x.db",
    ),
    "decided": lambda: data_of(make_study(40, finalists=6, noise=0.002)),
    "contradicted": lambda: _horizon_data(0.03),
    "language model": lambda: ReportInput(LM_SPEC, tuple(lm_search(noise=0.002) + lm_finalists())),
}


@pytest.fixture(scope="module", params=sorted(STUDIES))
def report(request, tmp_path_factory):
    data = STUDIES[request.param]()
    paths = write_report(data, tmp_path_factory.mktemp("report") / "out")
    return paths.answer, paths.markdown.read_text(), paths.opening


def test_the_first_screen_answers_in_at_most_150_words_then_the_figure_and_the_table(report):
    ans, md, opening = report
    screen = first_screen(md)
    assert words(screen) <= FIRST_SCREEN_WORDS, f"{words(screen)} words before the first table:\n{screen}"
    assert screen.startswith("# Head-count report:") and "## The answer" in screen
    assert opening in screen  # the answer's paragraph leads
    assert "How sure:" in opening and "What it gains:" in opening
    assert ("What deciding costs:" in opening) is (not ans.decided)
    if not ans.decided and not ans.contradicted:
        assert ans.cost_text() in opening  # the answer's own forecast, not a second wording of it
    assert ans.evidence is Evidence.FINALISTS and "(evidence.png)" in screen  # then the trade-off figure
    table = md[len(screen) :].split("\n\n", 1)[0]
    assert table.startswith("| heads per layer | verdict |")  # and every finalist's verdict


def test_a_decided_answer_says_use_and_an_open_one_says_what_is_known_instead(report):
    ans, md, opening = report
    heads = ans.recommended.heads
    layout = (
        ",".join(map(str, heads)) if len(set(heads)) > 1 or ans.recommended.kv_heads == heads else heads[0]
    )
    if ans.decided:
        assert opening.startswith(f"**Use {layout} heads per layer")
    else:
        assert opening.startswith(f"**Not decided yet: {layout} heads per layer")
        assert "so far**" in opening and "**Use " not in md


def test_the_statistics_are_explained_once_further_down(report):
    _, md, opening = report
    for phrase in ("multivariate t posterior", "fixed-sequence test", "indifference zone"):
        assert phrase not in first_screen(md)
    assert md.count("a multivariate t posterior") == 1 and md.count("(a fixed-sequence test") == 1
    section = md.split("## How to read this report", 1)[1].split("\n## ", 1)[0]
    assert "a multivariate t posterior" in section and "docs/method.md" in section
    assert md.index("## How to read this report") > md.index("### Evidence:")


def test_every_count_of_finalist_runs_agrees_and_names_what_it_counts(tmp_path):
    """The grid's 20 paired runs are what the answer rests on; the horizon check's 6 at twice the horizon are
    finalist runs too: the header, the Evidence section and the account each say which they count."""
    paths = write_report(_horizon_data(0.003), tmp_path / "out")
    md = paths.markdown.read_text()
    assert sum(a.n for a in paths.answer.candidates) == 20
    assert "### Evidence: 2 layouts, 20 paired runs" in md
    assert (
        "2 finalist layouts trained in 26 runs: the 20 paired runs the answer rests on, and 6 at another "
        "horizon (the horizon pilot and check)" in md
    )
    assert "finalist runs (every horizon): COMPLETE 26" in md
    counted = {int(n) for n in re.findall(r"(\d+) paired runs(?! a layout)", md)}
    assert counted == {20}, counted  # "paired runs" always counts the answer's grid


def test_the_reproduce_command_names_no_folder_of_the_machine_the_study_ran_on(tmp_path):
    study = make_study(24)
    data = dataclasses.replace(data_of(study), spec_path=str(tmp_path / "specs" / "synthetic.toml"))
    md = write_report(data, tmp_path / "out").markdown.read_text()
    assert str(tmp_path) not in md
    assert "Reproduce it from the folder that holds synthetic.toml" in md
    assert "explorer study run synthetic.toml\nexplorer study resume synthetic" in md
    relative = dataclasses.replace(data, spec_path="specs/synthetic.toml")
    md = write_report(relative, tmp_path / "again").markdown.read_text()
    assert "explorer study run specs/synthetic.toml\n" in md
    assert "Reproduce it from the folder the study was started in" in md
    # without a spec file, the one command that resumes it is written once
    md = write_report(data_of(study), tmp_path / "third").markdown.read_text()
    block = md.split("Reproduce", 1)[1]
    assert block.count("explorer study resume synthetic") == 1
