"""The answer's statistics are pure: no module of explorer.insight imports torch, directly or through what it
imports (what needs a trained model lives in explorer.analysis)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

INSIGHT = Path(__file__).resolve().parents[2] / "explorer" / "insight"
MODULES = sorted(
    "explorer.insight" if p.name == "__init__.py" else f"explorer.insight.{p.stem}" for p in INSIGHT.glob("*.py")
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


def test_no_insight_module_imports_torch():
    assert len(MODULES) > 10 and "explorer.insight.recommend" in MODULES
    assert torch_loaded_by(MODULES) == [], "move the code that needs torch to explorer.analysis"


def test_the_purity_check_can_fail():
    assert torch_loaded_by(["explorer.insight.pareto", "explorer.analysis", "explorer.insight.rule"]) == [
        "explorer.analysis"
    ]
