"""report.html as a reader opens it: in a real browser (headless Chromium), every figure decoded and drawn, every
table rendered, and nothing fetched from anywhere (the page is self-contained)."""

from __future__ import annotations

import struct

import pytest
from optuna.trial import TrialState

from explorer.output import write_report
from tests.browser import Page, find_chromium
from tests.fixtures import make_study
from tests.output.test_report import BENCH, data_of

CHROMIUM = find_chromium()

# every image, as the page decoded it, and every table, as laid out
FIGURES_JS = (
    "[...document.images].map(i => [i.alt, i.complete, i.naturalWidth, i.getBoundingClientRect().width])"
)
TABLES_JS = (
    "[...document.querySelectorAll('table')].map(t => [t.rows.length, t.rows[0].cells.length,"
    " t.getBoundingClientRect().height])"
)


@pytest.mark.slow
@pytest.mark.skipif(CHROMIUM is None, reason="no Chromium on PATH: apt-get install chromium (.ci/run does)")
def test_the_report_opens_in_a_browser_with_every_figure_and_table_and_no_request_out(tmp_path):
    study = make_study(
        40, states={TrialState.FAIL: 2, TrialState.PRUNED: 3}, bench=BENCH, finalists=3, name="browser"
    )
    paths = write_report(data_of(study), tmp_path / "out")
    html = paths.html.read_text()
    n_figures = html.count("<img ")
    n_tables = html.count("<table>")
    assert n_figures >= 5 and n_tables >= 3
    assert CHROMIUM is not None
    with Page(CHROMIUM) as page:
        page.open(paths.html.as_uri())
        figures = page.evaluate(FIGURES_JS)
        tables = page.evaluate(TABLES_JS)
        title = page.evaluate("document.title")
        shot = page.screenshot(tmp_path / "report.png")  # kept in tmp_path for a person to look at
        requests = list(page.requests)
    assert title == "Head-count report: browser"
    assert len(figures) == n_figures
    for alt, complete, natural_width, shown_width in figures:
        assert complete and natural_width >= 400 and shown_width > 100, alt  # decoded and drawn
    assert len(tables) == n_tables
    assert all(rows >= 2 and cells >= 2 and height > 20 for rows, cells, height in tables)
    # the page itself, and nothing else: no script, font, style sheet or image from any network
    assert [url for url in requests if not url.startswith("data:")] == [paths.html.as_uri()]
    assert sum(url.startswith("data:image/png;base64,") for url in requests) == n_figures
    data = shot.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    width, height = struct.unpack(">II", data[16:24])
    assert width >= 1100 and height > 2000 and len(data) > 50_000  # the whole long page, not a blank one
