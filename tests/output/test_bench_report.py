"""explorer.output._bench_report: the attention benchmark's table and figure."""

from __future__ import annotations

import pandas as pd

from explorer.output import OutputFolder, write_bench

BENCH = pd.DataFrame(
    [
        {"impl": "serial", "median_ms": 12.4, "iqr_ms": 0.3, "d_model": 64, "heads": 8},
        {"impl": "merged", "median_ms": 3.1, "iqr_ms": 0.1, "d_model": 64, "heads": 8},
    ]
)


def test_write_bench_writes_the_table_and_a_figure_of_the_forward_pass(tmp_path):
    files = write_bench(BENCH, OutputFolder(tmp_path / "fwd"))
    assert sorted(p.name for p in files) == ["bench.csv", "bench.png"]
    assert pd.read_csv(tmp_path / "fwd" / "bench.csv").equals(BENCH)
    assert (tmp_path / "fwd" / "bench.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    decoding = write_bench(BENCH, OutputFolder(tmp_path / "dec"), decode=True)
    assert [p.name for p in decoding] == ["bench.csv"]  # no figure for the decoding table
