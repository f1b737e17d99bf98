"""The specs the benchmarks write load as the product reads them: a benchmark whose spec has gone stale (a key
renamed or removed) fails here, not on the day someone runs it."""

from __future__ import annotations

import pytest

from benchmarks import dashboard_check, deploy, synthetic
from explorer.errors import SpecError
from explorer.spec import load_spec


@pytest.mark.parametrize(
    "name, text",
    [
        ("deploy", deploy.SPEC.format(name="deploy", runtime="eager")),
        ("dash", dashboard_check.SPEC),
    ],
)
def test_a_benchmark_spec_loads(tmp_path, name, text):
    path = tmp_path / f"{name}.toml"
    path.write_text(text)
    assert load_spec(path).name == name


@pytest.mark.parametrize("finalists", [False, True])
def test_the_tiny_spec_loads(tmp_path, finalists):
    spec = load_spec(synthetic.write_tiny_spec(tmp_path, "tiny", finalists=finalists, folds=2))
    assert spec.finalists.enabled is finalists and spec.finalists.folds == 2


def test_a_stale_spec_is_refused(tmp_path):
    path = tmp_path / "deploy.toml"
    path.write_text(
        deploy.SPEC.format(name="deploy", runtime="eager").replace("epochs = 6", "max_epochs = 6")
    )
    with pytest.raises(SpecError, match="max_epochs"):
        load_spec(path)
