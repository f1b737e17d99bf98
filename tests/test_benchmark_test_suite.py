"""benchmarks/test_suite.py reads the README's test command and pytest's closing lines: a README or pytest whose
output changed shape fails here, not on the day someone records the suite's time."""

from __future__ import annotations

import pytest

from benchmarks.common import ROOT
from benchmarks.test_suite import counts, readme_test_command, slowest

PYTEST_TAIL = """\
........s.                                                               [100%]
============================= slowest 15 durations =============================
90.18s call     tests/test_packaging.py::test_python_api_runs_a_two_trial_study
53.21s setup    tests/test_packaging.py::test_no_bench_skips_the_attention_bench
0.05s teardown tests/test_packaging.py::test_torch_floor

(3 durations < 0.005s hidden.  Use -vv to show these durations.)
=========================== short test summary info ============================
SKIPPED [1] tests/test_packaging.py:282: no PostgreSQL server
20 passed, 1 skipped, 2 warnings in 196.45s (0:03:16)
"""


def test_the_readme_test_command_is_the_install_then_pytest():
    command = readme_test_command((ROOT / "README.md").read_text())
    assert command.startswith(".venv/bin/pip install -e '.[dev]' && ") and "python -m pytest" in command


def test_a_readme_without_the_comment_is_refused():
    with pytest.raises(SystemExit, match="Run the tests"):
        readme_test_command("# explorer\n\n```bash\n# Set up\npython3 -m venv .venv\n```\n")


def test_pytest_counts_and_slowest_durations_are_read_from_its_output():
    assert counts(PYTEST_TAIL) == {"passed": 20, "skipped": 1}
    assert counts("nothing here") == {}
    assert [line.split()[0] for line in slowest(PYTEST_TAIL)] == ["90.18s", "53.21s", "0.05s"]
    assert slowest("1 passed in 0.1s") == []
