"""The Python example of docs/hf.md runs as written, on a tiny checkpoint saved where it says "my-llama/"."""

from __future__ import annotations

import contextlib
import io
import os
import re
from pathlib import Path

import pytest

pytest.importorskip("transformers")

from tests.pretrained.tiny_models import llama  # noqa: E402

PAGE = Path(__file__).resolve().parents[2] / "docs" / "hf.md"


def test_the_pretrained_example_runs_and_writes_a_smaller_checkpoint(tmp_path: Path, monkeypatch) -> None:
    section = PAGE.read_text().split("## A model you already trained", 1)[1]
    code = re.search(r"```python\n(.*?)```", section, re.S).group(1)
    llama(vocab_size=256).save_pretrained(tmp_path / "my-llama")  # byte-level, as the example's text task
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("HF_MODULES_CACHE", str(tmp_path / "modules"))  # the remote code is copied here
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        exec(compile(code, str(PAGE), "exec"), {})  # noqa: S102 - the page's own example
    lines = printed.getvalue().splitlines()
    assert [line.split()[0] for line in lines] == ["original", "candidate"]
    kv = [int(line.split()[-5]) for line in lines]
    assert kv == [256, 128]  # 2 layers x K,V x kv heads x 8 wide x 4 bytes: 2 kv heads a layer, then 1
    assert {"config.json", "model.safetensors", "modeling_shrunk.py"} <= set(os.listdir("my-llama-smaller"))
