"""The answer's statistics are pure: no module of explorer.answer imports torch, directly or through what it
imports (what needs a trained model lives in explorer.analysis)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ANSWER = Path(__file__).resolve().parents[2] / "explorer" / "answer"
MODULES = ["explorer.answer"] + sorted(
    f"explorer.answer.{p.stem}" for p in ANSWER.glob("_*.py") if p.stem != "__init__"
)

# Imports each module in turn in one fresh interpreter and names those after whose import torch was loaded.
_PROBE = """
import importlib, json, sys
loaded = []
for module in sys.argv[1:]:
    importlib.import_module(module)
    if "torch" in sys.modules:
        loaded.append(module)
        break
print(json.dumps(loaded))
"""


def torch_loaded_by(modules: list[str]) -> list[str]:
    """The first of ``modules`` whose import (in a fresh interpreter, in order) loads torch, or []."""
    out = subprocess.run(
        [sys.executable, "-c", _PROBE, *modules], capture_output=True, text=True, check=True
    ).stdout
    return json.loads(out)


def test_no_answer_module_imports_torch():
    assert len(MODULES) > 10 and "explorer.answer._recommend" in MODULES
    assert torch_loaded_by(MODULES) == [], "move the code that needs torch to explorer.analysis"


def test_the_purity_check_can_fail():
    planted = ["explorer.answer._pareto", "explorer.analysis._trial_heads", "explorer.answer._rule"]
    assert torch_loaded_by(planted) == ["explorer.analysis._trial_heads"]


def test_every_public_name_of_the_answer_loads_without_torch():
    """The package's surface too: each name loads from its private module, none of which needs torch."""
    probe = "import sys, explorer.answer as a\nfor n in a.__all__: getattr(a, n)\nprint(len(a.__all__), 'torch' in sys.modules)"
    out = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, check=True
    ).stdout.split()
    assert int(out[0]) > 20 and out[1] == "False"
