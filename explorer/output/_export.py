"""`explorer export`: one trial of a study as a run config, or as a trained model to ship, with its config.

Formats (:data:`EXPORT_FORMATS`):

* ``config`` (the default): the run config JSON that `explorer train --config` rebuilds and retrains exactly;
* ``state``: the trained ``state_dict`` and the metadata in one ``torch.save`` file (``.pt``) of plain values;
* ``pt2``: a ``torch.export`` program with the weights (``torch.export.save``; batch dimension dynamic);
* ``onnx``: an ONNX graph with the weights (``torch.onnx.export(dynamo=True)``; batch dimension dynamic);
* ``hf``: for a ``[model] hf`` study, the trained transformers model (``config.json`` and ``model.safetensors``,
  parity-checked through ``from_pretrained``); for explorer's own models, a Hugging Face ``config.json`` of the
  layout only (:mod:`explorer.output._hf_export`; the ``hf`` extra).

The weights come from the study's artifact store (:func:`explorer.study._retrain.trained_model`; a trial whose
weights were evicted is retrained exactly). Every model file carries the run config, the input shape and the
study's latency figure for the trial with its stated spread (the 95% interval a new timing should fall in), so
`explorer bench model FILE` can say whether the shipped model is as fast as the study measured. Before a model
file is put in place it is loaded back the way `bench model` loads it and run on the task's whole test split:
its logits must match PyTorch's within :data:`PARITY_TOLERANCE` (max absolute difference, float32), or nothing
is written. The output path is checked before any work, and written atomically.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import os
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from torch import nn

from explorer.answer import Answer, architectures, resolve_trial
from explorer.data import DATA_SEED, load_task
from explorer.errors import ConfigError, ExportMismatchError
from explorer.layout import InputSpec
from explorer.measure import RunConfig, write_run_config
from explorer.meta import package_version
from explorer.model import (
    EXPORT_VERSION,
    FORMAT_SUFFIX,
    META_KEY,
    PT2_EXTRA,
    HFModel,
    load_exported,
    logit_parity,
    onnx_bytes,
    pt2_archive_constants,
    quiet_torch,
    require_onnx,
)
from explorer.output._hf_export import hf_config, write_hf_config, write_hf_model
from explorer.output._result_folders import as_user_made
from explorer.spec import StudySpec
from explorer.storage import Retiming, TrialRecord, trial_label
from explorer.study import ArtifactStore, model_builder, trained_model

log = logging.getLogger(__name__)

EXPORT_FORMATS = ("config", "state", "pt2", "onnx", "hf")
PARITY_TOLERANCE = 1e-4  # max |logit difference| allowed between an exported model and PyTorch (float32)


def run_config_of(record: TrialRecord, spec: StudySpec, storage: str | None = None) -> RunConfig:
    """The run config that retrains ``record`` exactly: its architecture, learning rate, seed and schedule, and
    the epoch it stopped at (a rung, or its whole schedule)."""
    assert record.config is not None
    return RunConfig(
        task=spec.task.name,
        task_options=dict(spec.task.options),
        model=record.config,
        train=record.train_config(),
        stop_after=record.epochs_run if record.epochs_run < (record.epochs_planned or 0) else None,
        build=spec.model.build,
        hf=None if spec.model.hf is None else {"model_type": spec.model.hf, "config": spec.model.config},
        source={
            "study": spec.name,
            "storage": storage,
            "trial": record.number,
            "trial_label": trial_label(spec.name, record.number),
            "role": record.role,
            "val_accuracy": record.val_accuracy,
            "test_accuracy": record.test_accuracy,
            "latency_ms": record.latency_ms,
            "device": record.device,
        }
        | {  # a language model's loss and decoding, where measured
            k: v
            for k, v in (
                ("val_bpb", record.val_bpb),
                ("test_bpb", record.test_bpb),
                ("decode_ms", record.decode_ms),
            )
            if v is not None
        },
    )


def check_out_path(out: str | Path, option: str = "--out") -> Path:
    """``out`` if a file can be written there, else a one-line ConfigError; nothing is created."""
    out = Path(out)
    if out.is_dir():
        raise ConfigError(f"{option} {out} is a folder; give a file path such as {out / 'model.onnx'}.")
    existing = out.parent
    while not existing.exists() and existing != existing.parent:
        existing = existing.parent
    if not existing.is_dir() or not os.access(existing, os.W_OK | os.X_OK):
        raise ConfigError(
            f"cannot write {option} {out} ({existing} is not a writable folder); choose another path."
        )
    if out.exists() and not os.access(out, os.W_OK):
        raise ConfigError(f"cannot replace {option} {out} (it is read-only); choose another path.")
    return out


def study_latency(records: Sequence[TrialRecord], record: TrialRecord) -> dict[str, Any] | None:
    """The study's latency figure for ``record``'s architecture with its stated spread (the report's interval),
    and the setup it was measured in."""
    lat = record.latency
    if lat is None:
        return None
    arch = next((a for a in architectures(records, record.role) if record.number in a.numbers), None)
    low, high, median = (
        (arch.latency.low, arch.latency.high, arch.latency.estimate)
        if arch is not None
        else (lat.median_ms - lat.iqr_ms, lat.median_ms + lat.iqr_ms, lat.median_ms)
    )
    return {
        "trial": record.number,
        "median_ms": median,
        "low": low,
        "high": high,
        "method": arch.latency.method if arch is not None else "the trial's IQR",
        "trial_median_ms": lat.median_ms,
        "batch_size": lat.batch_size,
        "seq_len": lat.seq_len,
        "threads": lat.threads,
        "runtime": lat.runtime,
        "dtype": lat.dtype,
        "device": lat.device,
    }


@dataclass(frozen=True)
class ExportResult:
    """What `explorer export` wrote."""

    record: TrialRecord
    path: Path
    format: str
    max_abs_diff: float | None  # exported vs PyTorch logits on the test split (None for a config)
    examples: int  # test examples the difference was measured on
    agreement: float | None  # fraction of test examples whose predicted class is the same
    notes: tuple[str, ...] = ()  # hf: the layer values the stock config cannot express
    answer: Answer | None = None  # the study's answer, when the export named a pick of it
    loader: str = ""  # hf with weights: the transformers class whose from_pretrained loads the folder
    # whether that from_pretrained needs trust_remote_code=True (a checkpoint's cut: per-layer heads)
    remote_code: bool = False

    def to_dict(self, study: str) -> dict[str, Any]:
        return {
            "study": study,
            "answer": None if self.answer is None else self.answer.to_dict(),
            "trial": self.record.number,
            "trial_label": trial_label(study, self.record.number),
            "heads": list(self.record.heads),
            "format": self.format,
            "out": str(self.path),
            "max_abs_logit_diff": self.max_abs_diff,
            "tolerance": None if self.max_abs_diff is None else PARITY_TOLERANCE,
            "test_examples": self.examples,
            "prediction_agreement": self.agreement,
        } | (
            {
                "not_in_stock_config": list(self.notes),
                "weights": bool(self.loader),
                "loads_with": self.loader or None,
                "trust_remote_code": self.remote_code,
            }
            if self.format == "hf"
            else {}
        )


def _meta(
    record: TrialRecord,
    records: Sequence[TrialRecord],
    spec: StudySpec,
    task_spec: InputSpec,
    fmt: str,
    storage: str | None,
) -> dict[str, Any]:
    return {
        "explorer_export": EXPORT_VERSION,
        "format": fmt,
        "explorer_version": package_version(),
        "torch_version": torch.__version__,
        "run_config": run_config_of(record, spec, storage).to_dict(),
        "input": dataclasses.asdict(task_spec),
        # what rebuilds the test split the export was checked on: load_task(task, seed=data_seed, **options)
        "test_split": {"task": spec.task.name, "options": dict(spec.task.options), "data_seed": DATA_SEED},
        "study_latency": study_latency(records, record),
    }


def _write_model(model: nn.Module, meta: dict[str, Any], fmt: str, example: torch.Tensor, path: Path) -> None:
    text = json.dumps(meta)
    if fmt == "state":
        state = {k: v.detach().to("cpu", copy=True) for k, v in model.state_dict().items()}
        torch.save({META_KEY: text, "state_dict": state}, path)
    elif fmt == "pt2":
        with quiet_torch():
            shapes = ({0: torch.export.Dim("batch", min=1)},)
            program = torch.export.export(model, (example,), dynamic_shapes=shapes)
            torch.export.save(program, str(path), extra_files={PT2_EXTRA: text})
    else:
        import onnx

        proto = onnx.load_from_string(onnx_bytes(model, example))
        onnx.helper.set_model_props(proto, {META_KEY: text})
        onnx.save_model(proto, str(path))


def _export_hf_model(
    records: Sequence[TrialRecord],
    spec: StudySpec,
    which: str,
    out: str | Path,
    store: ArtifactStore | None,
    storage: str | None,
    retimings: Sequence[Retiming],
) -> ExportResult:
    """The trained transformers model of a ``[model] hf`` study, or the recovered cut of a ``[model] pretrained``
    one, saved for ``from_pretrained`` and checked (:func:`explorer.output._hf_export.write_hf_model`,
    :func:`explorer.pretrained.save_shrunk` for a cut)."""
    if store is None:
        raise ValueError("exporting a model needs the study's artifact store")
    record = resolve_trial(records, spec, which, retimings)
    task = load_task(spec.task.name, **spec.task.options)
    model = trained_model(spec.name, record, task, spec.latency, store, builder=model_builder(spec))
    assert isinstance(model, HFModel)  # a [model] hf or pretrained study's builder builds one
    meta = _meta(record, records, spec, task.spec, "hf", storage)
    remote_code = (
        spec.model.pretrained is not None
    )  # a checkpoint's cut: per-layer heads, its own modeling file
    path, diff, agreement, loader = write_hf_model(
        model, task, out, meta, PARITY_TOLERANCE, shrunk=remote_code
    )
    return ExportResult(
        record, path, "hf", diff, len(task.test[0]), agreement, loader=loader, remote_code=remote_code
    )


def export_trial(
    records: Sequence[TrialRecord],
    spec: StudySpec,
    which: str,
    out: str | Path,
    fmt: str = "config",
    store: ArtifactStore | None = None,
    storage: str | None = None,
    retimings: Sequence[Retiming] = (),
) -> ExportResult:
    """Export the trial ``which`` names to ``out`` as ``fmt`` (see the module docstring); ``storage`` is the
    masked storage URL recorded in the config, ``store`` where trained weights come from."""
    if fmt not in EXPORT_FORMATS:
        raise ConfigError(f"unknown export format {fmt!r}; choose one of {', '.join(EXPORT_FORMATS)}.")
    if fmt == "hf" and (spec.model.hf is not None or spec.model.pretrained is not None):
        return _export_hf_model(records, spec, which, out, store, storage, retimings)
    if spec.model.pretrained is not None and fmt in ("config", "state"):
        raise ConfigError(
            f"a [model] pretrained study's layouts are cuts of its checkpoint, which a run config cannot rebuild, so "
            f"--format {fmt} cannot be loaded back; export the recovered model with --format hf."
        )
    if fmt == "hf":
        record = resolve_trial(records, spec, which)
        doc, lost = hf_config(record, spec, load_task(spec.task.name, **spec.task.options).spec)
        return ExportResult(record, write_hf_config(doc, out), fmt, None, 0, None, tuple(lost))
    out = check_out_path(out)
    if fmt == "onnx":
        require_onnx("exporting to ONNX")
    if fmt == "pt2":
        pt2_archive_constants()  # a torch without the format fails here, before any work
    record = resolve_trial(records, spec, which, retimings)
    if fmt == "config":
        write_run_config(out, run_config_of(record, spec, storage))
        return ExportResult(record, out, fmt, None, 0, None)
    if store is None:
        raise ValueError("exporting a model needs the study's artifact store")
    log.info("exporting trial #%d of %s as %s to %s", record.number, spec.name, fmt, out)
    task = load_task(spec.task.name, **spec.task.options)
    model = trained_model(spec.name, record, task, spec.latency, store, builder=model_builder(spec))
    X = task.test[0]
    with torch.inference_mode():
        reference = model(X).float()
    example = X[: max(2, min(len(X), spec.latency.batch_size))]
    out.parent.mkdir(parents=True, exist_ok=True)
    # torch.export insists on a .pt2 name; the temporary file keeps the format's suffix for every format
    fd, tmp_name = tempfile.mkstemp(
        dir=out.parent, prefix=f".{out.name}.", suffix=f".tmp{FORMAT_SUFFIX[fmt]}"
    )
    os.close(fd)
    tmp = Path(tmp_name)
    try:
        _write_model(model, _meta(record, records, spec, task.spec, fmt, storage), fmt, example, tmp)
        logits = load_exported(tmp, fmt).forward(X)  # loaded back exactly as `bench model` loads it
        diff, agreement = logit_parity(logits, reference)
        if not diff <= PARITY_TOLERANCE:
            raise ExportMismatchError(
                f"the {fmt} export of trial #{record.number} differs from PyTorch by up to {diff:.3g} in the "
                f"logits (tolerance {PARITY_TOLERANCE:g}); nothing was written. Try another --format."
            )
        as_user_made(tmp)
        os.replace(tmp, out)
    finally:
        tmp.unlink(missing_ok=True)
    return ExportResult(record, out, fmt, diff, len(X), agreement)
