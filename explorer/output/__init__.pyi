"""The public surface of :mod:`explorer.output` (read by type checkers, and by its __init__ at run time)."""

from ._answer_sections import answer_blocks as answer_blocks
from ._bench_report import write_bench as write_bench
from ._compare_figure import compare_figure as compare_figure, write_compare as write_compare
from ._export import (
    PARITY_TOLERANCE as PARITY_TOLERANCE,
    ExportResult as ExportResult,
    export_trial as export_trial,
)
from ._heads_report import analyse_trial as analyse_trial, write_heads as write_heads
from ._hf_export import (
    hf_config as hf_config,
    nearest_uniform as nearest_uniform,
    write_hf_config as write_hf_config,
    write_hf_model as write_hf_model,
)
from ._plot_data import effect_data as effect_data, pareto_data as pareto_data, quality as quality
from ._plots import save_png as save_png
from ._report import ReportInput as ReportInput, ReportPaths as ReportPaths, write_report as write_report
from ._result_folders import MANIFEST as MANIFEST, OutputFolder as OutputFolder
from ._sections import relations_blocks as relations_blocks, why_fewer_than_k as why_fewer_than_k
