"""The public surface of :mod:`explorer.output` (read by type checkers, and by its __init__ at run time)."""

from ._bench_report import write_bench as write_bench
from ._compare_figure import write_compare as write_compare
from ._export import ExportResult as ExportResult, export_trial as export_trial
from ._heads_report import analyse_trial as analyse_trial
from ._report import ReportInput as ReportInput, ReportPaths as ReportPaths, write_report as write_report
from ._result_folders import OutputFolder as OutputFolder
from ._sections import why_fewer_than_k as why_fewer_than_k
