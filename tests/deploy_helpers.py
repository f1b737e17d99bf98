"""Small real studies for the deploy/share tests: a digits model small enough to train in about a second."""

from __future__ import annotations

from pathlib import Path

TINY_TOML = """\
name = "{name}"
n_trials = {n_trials}
sampler = "random"
seed = 0
bench = {bench}
{extra}

[task]
name = "digits"
epochs = 2
batch_size = 256

[space]
d_model = [16]
n_layers = [2]
heads = [1, 2, 4]
min_dk = [4]
families = ["uniform"]
mlp_ratio = [1.0]

[latency]
device = "cpu"
batch_size = 8
threads = 1
min_run_time = 0.02
{latency}

[early_stopping]
enabled = false

[finalists]
enabled = false
"""


def write_tiny_spec(
    folder: Path,
    name: str = "tiny",
    n_trials: int = 2,
    extra: str = "",
    latency: str = "",
    bench: bool = False,
) -> Path:
    """A spec of ``n_trials`` uniform-head digits models (d_model 16, 2 layers, 2 epochs), no finalists, and no
    attention bench unless ``bench``."""
    path = Path(folder) / f"{name}.toml"
    text = TINY_TOML.format(
        name=name, n_trials=n_trials, extra=extra, latency=latency, bench=str(bench).lower()
    )
    path.write_text(text)
    return path


def run_tiny_study(folder: Path, name: str = "tiny", n_trials: int = 2, **kw: str):
    """Run the tiny study with its SQLite file in ``folder``; return (storage URL, summary)."""
    import torch

    from explorer.study import run_study

    url = f"sqlite:///{Path(folder) / f'{name}.db'}"
    torch.set_num_threads(1)
    summary = run_study(write_tiny_spec(folder, name, n_trials, **kw), url)
    return url, summary
