"""explorer.model._export_files: model files `explorer export` writes, read back: the metadata they carry, the config
they declare, and how close their logits are to PyTorch's."""

from __future__ import annotations

import dataclasses
import json

import pytest
import torch

from explorer.errors import ConfigError, DataError
from explorer.layout import InputSpec, ModelConfig
from explorer.model import (
    EXPORT_VERSION,
    FORMAT_SUFFIX,
    META_KEY,
    PT2_EXTRA,
    Exported,
    build_model,
    declared_config,
    load_exported,
    logit_parity,
    pt2_archive_constants,
    quiet_torch,
)

SPEC = InputSpec(kind="features", seq_len=4, n_classes=3, n_features=2)
CONFIG = ModelConfig(d_model=8, heads=(2,))


def meta(version: int = EXPORT_VERSION, model: dict | None = None) -> dict:
    return {
        "explorer_export": version,
        "input": dataclasses.asdict(SPEC),
        "run_config": {"model": CONFIG.to_dict() if model is None else model},
    }


def tiny() -> torch.nn.Module:
    torch.manual_seed(0)
    return build_model(CONFIG, SPEC).eval()


def write_state(path, model, version: int = EXPORT_VERSION) -> None:
    """A state file as `explorer export --format state` writes it: the metadata under META_KEY."""
    torch.save({META_KEY: json.dumps(meta(version)), "state_dict": model.state_dict()}, path)


def test_a_state_file_loads_as_the_model_it_holds(tmp_path):
    model, x = tiny(), torch.randn(5, SPEC.seq_len, SPEC.n_features)
    path = tmp_path / f"m{FORMAT_SUFFIX['state']}"
    write_state(path, model)
    exported = load_exported(path)
    assert isinstance(exported, Exported) and exported.format == "state" and exported.input == SPEC
    with torch.no_grad():
        assert torch.allclose(exported.forward(x), model(x), atol=1e-6)


def test_a_file_of_another_export_version_or_suffix_is_refused(tmp_path):
    old = tmp_path / "old.pt"
    write_state(old, tiny(), version=EXPORT_VERSION + 1)
    with pytest.raises(DataError, match="was not written by `explorer export`"):
        load_exported(old)
    with pytest.raises(ConfigError) as err:
        load_exported(tmp_path / "m.bin")
    assert all(suffix in str(err.value) for suffix in FORMAT_SUFFIX.values())


def test_a_pt2_file_carries_its_metadata_as_the_extra_file(tmp_path):
    assert hasattr(pt2_archive_constants(), "WEIGHTS_CONFIG_FILENAME_FORMAT")
    model, x = tiny(), torch.randn(2, SPEC.seq_len, SPEC.n_features)
    path = tmp_path / f"m{FORMAT_SUFFIX['pt2']}"
    with quiet_torch():
        program = torch.export.export(model, (x,))
        torch.export.save(program, str(path), extra_files={PT2_EXTRA: json.dumps(meta())})
    exported = load_exported(path)
    assert exported.format == "pt2" and exported.meta["explorer_export"] == EXPORT_VERSION
    with torch.no_grad():
        assert torch.allclose(exported.forward(x), model(x), atol=1e-5)


def test_declared_config_reads_the_model_and_refuses_one_it_cannot(tmp_path):
    assert declared_config(meta(), tmp_path / "m.pt") == CONFIG
    with pytest.raises(DataError, match="has no usable model config"):
        declared_config(meta(model={"d_model": 8}), tmp_path / "m.pt")


def test_logit_parity_is_the_largest_difference_and_the_share_of_equal_predictions():
    reference = torch.tensor([[1.0, 0.0], [0.0, 1.0], [2.0, 1.0], [0.0, 3.0]])
    logits = reference + torch.tensor([[0.0, 0.5], [0.0, 0.0], [0.0, 2.0], [0.0, 0.0]])
    diff, agree = logit_parity(logits, reference)
    assert diff == pytest.approx(2.0) and agree == pytest.approx(0.75)  # row 3 predicts the other class
    assert logit_parity(reference, reference) == (0.0, 1.0)
