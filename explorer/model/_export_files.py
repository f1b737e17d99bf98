"""Reading a model `explorer export` wrote, safely (timed by :mod:`explorer.measure._model_bench`).

Three files carry a trained model and its metadata (``explorer_export``: the run config, the input shape, the
study's latency figure and its spread):

* ``.onnx``: the graph and weights; the metadata in the model's ``metadata_props`` (key ``explorer``). Run by
  ONNX Runtime (the ``onnx`` extra).
* ``.pt2``: a ``torch.export`` program (``torch.export.save``), the metadata as the extra file
  ``explorer.json``. Loaded with ``torch.export.load`` only after :func:`check_pt2` has found nothing in the
  archive that loading would unpickle (torch loads some payloads with ``weights_only=False``).
* ``.pt``: ``{"explorer_export": meta JSON, "state_dict": {name: tensor}}`` read with
  ``torch.load(weights_only=True)``; the model is rebuilt from the config (a user's model by its ``build``
  function, imported by name) and run eagerly.

A file that is not one of these, or that would need unpickling, is a one-line :class:`DataError`; nothing runs.
Writing these files is :mod:`explorer.output._export`'s job.
"""

from __future__ import annotations

import io
import json
import pickle
import warnings
import zipfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from explorer.errors import ConfigError, DataError, RuntimeUnavailableError
from explorer.layout import InputSpec, ModelConfig
from explorer.limits import check_memory
from explorer.model._footprint import check_config_limits, check_model_fits
from explorer.model._hfmodel import HFBuilder
from explorer.model._model import build_model
from explorer.model._runtime import Runner, ort_runner, ort_session, quiet_torch, require_onnx
from explorer.model._usermodel import ModelBuilder

EXPORT_VERSION = 1


def logit_parity(logits: torch.Tensor, reference: torch.Tensor) -> tuple[float, float]:
    """How far an exported model's ``logits`` are from PyTorch's ``reference`` on the same inputs: the largest
    absolute difference, and the share of examples (positions, for a language model) with the same prediction."""
    diff = float((logits.float() - reference.float()).abs().max())
    return diff, float((logits.argmax(-1) == reference.argmax(-1)).float().mean())


FORMAT_SUFFIX = {"onnx": ".onnx", "pt2": ".pt2", "state": ".pt"}
META_KEY = "explorer"  # ONNX metadata_props key and the .pt2 extra file's stem
PT2_EXTRA = "explorer.json"
_RUNTIME_OF = {"onnx": "onnxruntime", "pt2": "torch.export", "state": "eager"}


@dataclass
class Exported:
    """An exported model, loaded: ``forward(x)`` gives logits ``[B, n_classes]`` as a CPU float tensor."""

    path: Path
    format: str  # onnx | pt2 | state
    meta: dict[str, Any]
    input: InputSpec
    make_runner: Callable[[torch.Tensor, torch.device, int], Runner]  # (example, device, threads) -> Runner

    @property
    def runtime(self) -> str:
        return _RUNTIME_OF[self.format]

    def forward(self, x: torch.Tensor, threads: int = 1) -> torch.Tensor:
        with torch.inference_mode():
            return self.make_runner(x, torch.device("cpu"), threads).output()


def _meta(raw: str | bytes | None, path: Path) -> dict[str, Any]:
    try:
        meta = json.loads(raw or "")
    except (TypeError, ValueError):
        meta = None
    if not isinstance(meta, dict) or meta.get("explorer_export") != EXPORT_VERSION:
        raise DataError(
            f"{path} was not written by `explorer export` (no explorer metadata); export it again."
        )
    return meta


def _input(meta: dict[str, Any], path: Path) -> InputSpec:
    try:
        return InputSpec(**meta["input"])
    except (KeyError, TypeError, ConfigError) as exc:
        raise DataError(f"{path} has malformed explorer metadata ({exc}); export it again.") from None


def declared_config(meta: dict[str, Any], path: Path) -> ModelConfig:
    """The model config an export's metadata declares, within explorer.limits."""
    try:
        config = ModelConfig.from_dict(meta["run_config"]["model"])
    except (KeyError, TypeError, ConfigError) as exc:
        raise DataError(f"{path} has no usable model config ({exc}); export it again.") from None
    check_config_limits(config, f"the model {path} declares")
    return config


def _format_of(path: Path) -> str:
    for fmt, suffix in FORMAT_SUFFIX.items():
        if path.suffix == suffix:
            return fmt
    raise ConfigError(
        f"cannot tell the format of {path}: name it .onnx, .pt2 or .pt (what `explorer export` writes)."
    )


# --------------------------------------------------------------------------------------------- pt2 safety


def pt2_archive_constants() -> Any:
    """torch's PT2 archive layout (``torch.export.pt2_archive.constants``), or a one-line error on a torch too
    old to write weights as raw bytes (the only .pt2 files explorer writes and loads): feature-detected, since
    the format arrived in the 2.x releases after explorer's torch floor."""
    try:
        from torch.export.pt2_archive import constants
    except ImportError:
        constants = None  # type: ignore[assignment]  # a torch older than the PT2 archive format
    if constants is None or not hasattr(constants, "WEIGHTS_CONFIG_FILENAME_FORMAT"):
        raise RuntimeUnavailableError(
            f".pt2 files need a torch with the PT2 archive format (this is {torch.__version__}); upgrade torch, "
            "or use --format state or onnx."
        )
    return constants


def check_pt2(path: Path) -> None:
    """Refuse a ``.pt2`` archive that ``torch.export.load`` would unpickle anything from.

    Weights and constants stored as raw bytes are safe; ``torch.export.load`` unpickles payloads marked
    ``use_pickle``, custom and opaque objects, legacy ``.pt`` weight files, and, when loading them with
    ``weights_only=True`` fails, its sample inputs. Each is refused here; the sample inputs must load with
    ``weights_only=True`` (so torch's fallback is never reached).
    """
    C = pt2_archive_constants()
    bad = DataError(
        f"{path} holds pickled objects that loading would run; only .pt2 files of plain tensors (as "
        "`explorer export` writes) are loaded."
    )
    try:
        with zipfile.ZipFile(path) as z:
            names = z.namelist()
            configs = [
                n
                for n in names
                if n.endswith("_config.json") and ("/data/weights/" in n or "/data/constants/" in n)
            ]
            if not any(n.endswith(C.ARCHIVE_FORMAT_PATH) for n in names) or not configs:
                raise DataError(
                    f"{path} is not a torch.export archive; export it again with `explorer export`."
                )
            for n in names:
                directory = n.split("/", 1)[-1]
                if directory.startswith((C.WEIGHTS_DIR, C.CONSTANTS_DIR)) and n.endswith(".pt"):
                    raise bad  # the legacy pickled weight and constant files
                if directory.startswith(
                    (C.AOTINDUCTOR_DIR, C.EXECUTORCH_DIR, C.MTIA_DIR, C.XL_MODEL_WEIGHTS_DIR)
                ):
                    raise bad  # compiled, foreign or differently stored payloads: not what explorer writes
                if directory.startswith(C.SAMPLE_INPUTS_DIR):
                    torch.load(io.BytesIO(z.read(n)), weights_only=True)
            for n in configs:
                for payload in json.loads(z.read(n)).get("config", {}).values():
                    name = str(payload.get("path_name", ""))
                    if payload.get("use_pickle") or name.startswith(
                        (C.CUSTOM_OBJ_FILENAME_PREFIX, C.OPAQUE_OBJ_FILENAME_PREFIX)
                    ):
                        raise bad
    except (zipfile.BadZipFile, OSError, ValueError, KeyError, AttributeError):
        raise DataError(f"{path} is not a readable torch.export archive; export it again.") from None
    except (pickle.UnpicklingError, RuntimeError):
        raise bad from None


# --------------------------------------------------------------------------------------------- loading


def _eager_runner(module: Any, runtime: str) -> Callable[[torch.Tensor, torch.device, int], Runner]:
    def make(x: torch.Tensor, device: torch.device, threads: int) -> Runner:
        if device.type != "cpu":
            module.to(device)
        xd = x.to(device)
        return Runner(runtime, lambda: module(xd))

    return make


def _load_onnx(path: Path) -> Exported:
    require_onnx("running an .onnx model")
    session = ort_session(str(path), torch.device("cpu"), 1)  # also checks that ORT can load it at all
    meta = _meta(session.get_modelmeta().custom_metadata_map.get(META_KEY), path)

    def make(x: torch.Tensor, device: torch.device, threads: int) -> Runner:
        same = device.type == "cpu" and threads == 1
        return ort_runner(session if same else ort_session(str(path), device, threads), x, device)

    return Exported(path, "onnx", meta, _input(meta, path), make)


def _load_pt2(path: Path) -> Exported:
    check_pt2(path)
    extra = {PT2_EXTRA: ""}
    try:
        with quiet_torch():
            program = torch.export.load(str(path), extra_files=extra)
    except Exception as exc:  # torch raises assorted types for a damaged archive
        raise DataError(
            f"{path} cannot be loaded by torch.export ({type(exc).__name__}); export it again."
        ) from None
    meta = _meta(extra[PT2_EXTRA], path)
    return Exported(path, "pt2", meta, _input(meta, path), _eager_runner(program.module(), "torch.export"))


def _builder(run_config: dict[str, Any], path: Path) -> ModelBuilder | None:
    """What builds a state file's model, as its study did: the transformers class its ``hf`` entry names (a
    ``[model] hf`` study's), the user's model function named by ``build`` (imported by name), or explorer's own
    (None)."""
    hf = run_config.get("hf")
    if hf is not None:
        if not (isinstance(hf, dict) and isinstance(hf.get("model_type"), str)):
            raise DataError(f"{path} names its transformers model in a malformed hf entry; export it again.")
        config = hf.get("config") or {}
        if not isinstance(config, dict):
            raise DataError(f"{path} names its transformers model in a malformed hf entry; export it again.")
        return HFBuilder.of(hf["model_type"], config)
    build = run_config.get("build")
    return None if build is None else ModelBuilder(str(build))


def _load_state(path: Path) -> Exported:
    if not zipfile.is_zipfile(path):  # what torch.save writes; anything else would reach the unpickler raw
        raise DataError(
            f"{path} is not a plain tensor file (not the torch zip archive `explorer export --format state` "
            "writes); export it again."
        )
    try:
        with warnings.catch_warnings():  # torch's notes on pickle protocols are not the user's business
            warnings.simplefilter("ignore")
            doc: Any = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as exc:  # a damaged or planted archive fails in torch with assorted types
        raise DataError(
            f"{path} is not a plain tensor file ({type(exc).__name__}); export it again."
        ) from None
    if not isinstance(doc, dict) or not isinstance(doc.get("state_dict"), dict):
        raise DataError(f"{path} is not an `explorer export --format state` file; export it again.")
    meta = _meta(doc.get(META_KEY), path)
    spec = _input(meta, path)
    config = declared_config(meta, path)
    check_model_fits(config, spec, train_batch=None, infer_batch=1, what=f"the model {path} declares")
    with torch.random.fork_rng(devices=[]):
        model = build_model(config, spec, _builder(meta["run_config"], path))
    try:
        model.load_state_dict(doc["state_dict"])
    except (RuntimeError, TypeError):
        raise DataError(f"the weights in {path} do not fit its model config; export it again.") from None
    return Exported(path, "state", meta, spec, _eager_runner(model.eval(), "eager"))


def load_exported(path: str | Path, fmt: str | None = None) -> Exported:
    """Load a file `explorer export` wrote (format from ``fmt`` or the file's suffix); see the module docstring."""
    path = Path(path)
    fmt = fmt or _format_of(path)
    if path.is_dir():
        raise ConfigError(
            f"{path} is a folder; give the path of an .onnx, .pt2 or .pt file `explorer export` wrote."
        )
    if not path.is_file():
        raise ConfigError(
            f"no model file {path}; write one with `explorer export NAME --format {fmt} --out {path}`."
        )
    # read whole (weights, graph): a file that cannot fit in memory is refused before it is read
    check_memory(3 * path.stat().st_size, f"loading {path}", "give a smaller model file")
    return {"onnx": _load_onnx, "pt2": _load_pt2, "state": _load_state}[fmt](path)
