"""The example checkpoint script trains a small Llama on the text task and saves what explorer.pretrained reads."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("transformers")

from explorer.pretrained import inspect_checkpoint  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]


def test_the_example_script_saves_a_checkpoint_that_is_read_as_a_llama(tmp_path: Path) -> None:
    out = tmp_path / "llama-text"
    done = subprocess.run(
        [sys.executable, "examples/pretrained/train_llama.py", "--out", str(out), "--steps", "3"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    assert "bits per byte after 3 steps" in done.stdout.splitlines()[-1]
    found = inspect_checkpoint(out)
    assert (found.architecture, found.layers, found.heads, found.kv_heads) == ("LlamaForCausalLM", 4, 8, 4)
