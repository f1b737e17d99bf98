"""`explorer bench attention --out DIR`: the benchmark's table as bench.csv, and its figure as bench.png."""

from __future__ import annotations

import tempfile
from pathlib import Path

import pandas as pd

from explorer.output._plots import save_png
from explorer.output._result_folders import OutputFolder
from explorer.output._study_plots import bench_figure


def write_bench(df: pd.DataFrame, folder: OutputFolder, decode: bool = False) -> list[Path]:
    """Write ``bench.csv`` and, for the forward pass, ``bench.png`` (no figure for the decoding table yet) into
    ``folder``; return the files."""
    folder.write("bench.csv", df.to_csv(index=False))
    if not decode:
        with tempfile.TemporaryDirectory() as tmp:
            figure = save_png(bench_figure(df.to_dict("records")), Path(tmp) / "b.png")
            folder.write("bench.png", figure.read_bytes())
    return folder.finish()
