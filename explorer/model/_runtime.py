"""How a timed model runs: eager PyTorch, ``torch.compile``, or ONNX Runtime (the runtime a model ships on).

Latency is only worth choosing a head layout on when it is measured where the model will run. A study's
``[latency] runtime`` picks one of :data:`~explorer.layout._config.LATENCY_RUNTIMES`:

* ``eager``: the module as it is (what training uses);
* ``compile``: ``torch.compile(model, dynamic=False)``, compiled once for the timed shape before timing starts
  (``torch.compiler.reset()`` first, so a study that compiles hundreds of architectures never hits Dynamo's
  recompilation limit and silently falls back to eager);
* ``onnxruntime``: the module exported with ``torch.onnx.export(dynamo=True)`` and run by an ONNX Runtime
  ``InferenceSession`` with the CPU provider, or the CUDA provider for a CUDA device (inputs and outputs bound
  on the GPU, so no host copies are timed). Needs the ``onnx`` extra (onnx, onnxruntime, onnxscript).

:func:`prepare_runner` turns a model and one example batch into a :class:`Runner`, a zero-argument callable that
runs one forward pass; :func:`explorer.measure._latency.time_forward` times it. The ONNX helpers
(:func:`onnx_bytes`, :func:`ort_session`) are shared with :mod:`explorer.output._export`.
"""

from __future__ import annotations

import contextlib
import importlib.util
import inspect
import io
import logging
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch
from torch import nn

from explorer.errors import ConfigError, DeviceError, MissingExtraError, RuntimeUnavailableError
from explorer.layout import LATENCY_RUNTIMES

log = logging.getLogger(__name__)

ONNX_PACKAGES = ("onnx", "onnxruntime", "onnxscript")  # the `onnx` extra: torch's exporter needs onnxscript


def require_onnx(what: str) -> None:
    """Raise a one-line :class:`MissingExtraError` naming the ``onnx`` extra when a package of it is missing."""
    for package in ONNX_PACKAGES:
        if importlib.util.find_spec(package) is None:
            raise MissingExtraError(what, "onnx", package)


def check_runtime(runtime: str, device: torch.device) -> None:
    """Fail fast (before any storage is touched) when ``runtime`` cannot run on ``device`` here."""
    if runtime not in LATENCY_RUNTIMES:
        raise ConfigError(f"unknown runtime {runtime!r}; choose one of {', '.join(LATENCY_RUNTIMES)}.")
    if runtime != "onnxruntime":
        return
    require_onnx("the onnxruntime runtime")
    if device.type == "cuda":
        import onnxruntime as ort

        if "CUDAExecutionProvider" not in ort.get_available_providers():
            raise DeviceError(
                "this onnxruntime has no CUDA provider; install onnxruntime-gpu, or time on the cpu."
            )


def runtime_version(runtime: str) -> str:
    """What a figure measured with ``runtime`` also depends on, for the latency cache key ('' for eager)."""
    if runtime == "onnxruntime":
        import onnxruntime as ort

        return f"ort{ort.__version__}"
    return ""


@contextlib.contextmanager
def quiet_torch() -> Any:
    """torch's exporters print progress to stdout and warn freely (Python warnings and torch's own logger); a
    library must not print (a ``--json`` document is the only thing on stdout), so the chatter goes to the
    package log at debug level."""
    out = io.StringIO()
    with contextlib.redirect_stdout(out), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        previous = logging.getLogger("torch").level
        logging.getLogger("torch").setLevel(logging.ERROR)
        try:
            yield
        finally:
            logging.getLogger("torch").setLevel(previous)
    if out.getvalue().strip():
        log.debug("torch.onnx: %s", out.getvalue().strip().replace("\n", " | "))


def onnx_bytes(model: nn.Module, example: torch.Tensor, dynamic_batch: bool = True) -> bytes:
    """``model`` exported to ONNX (torch's default opset; input ``x``, output ``logits``) as bytes.

    With ``dynamic_batch`` the batch dimension is symbolic, so one file serves any batch size; the sequence
    length stays the one of ``example`` (a learned positional table fixes the longest input anyway).
    """
    require_onnx("exporting to ONNX")
    shapes = ({0: torch.export.Dim("batch", min=1, max=1 << 20)},) if dynamic_batch else None
    # An example of batch 1 would be specialised (0/1 specialisation): trace with at least 2 rows.
    x = example if example.shape[0] > 1 or not dynamic_batch else torch.cat([example, example])
    log.debug("exporting %s to ONNX at input shape %s", type(model).__name__, tuple(x.shape))
    extra: dict[str, Any] = (
        {"optimize": True} if "optimize" in inspect.signature(torch.onnx.export).parameters else {}
    )
    try:
        with quiet_torch():
            program = torch.onnx.export(
                model,
                (x,),
                dynamo=True,
                dynamic_shapes=shapes,
                input_names=["x"],
                output_names=["logits"],
                verbose=False,
                **extra,  # graph optimisation, where this torch release's exporter has the keyword
            )
    except ImportError as exc:  # onnxscript or onnx imported by the exporter itself
        raise MissingExtraError("exporting to ONNX", "onnx", exc.name or "onnxscript") from None
    assert program is not None  # the dynamo exporter always returns its program
    return program.model_proto.SerializeToString()


def ort_session(model: bytes | str, device: torch.device, threads: int) -> Any:
    """An ONNX Runtime session for a model (bytes or a file path) on ``device`` with ``threads`` CPU threads."""
    require_onnx("ONNX Runtime")
    import onnxruntime as ort

    check_runtime("onnxruntime", device)
    options = ort.SessionOptions()
    options.intra_op_num_threads = threads
    options.inter_op_num_threads = 1
    options.log_severity_level = 3  # errors only: ORT's warnings go to stderr from C++, past any logger
    if device.type == "cuda":
        providers: list[Any] = [("CUDAExecutionProvider", {"device_id": device.index or 0})]
    else:
        providers = ["CPUExecutionProvider"]
    try:
        return ort.InferenceSession(model, sess_options=options, providers=providers)
    except Exception as exc:  # ORT raises its own Fail/InvalidGraph/NoSuchFile types, all plain Exceptions
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise ConfigError(f"ONNX Runtime cannot load the model ({first[:200]}).") from None


@dataclass
class Runner:
    """One forward pass of a prepared model on a fixed example batch: ``runner()`` runs it and returns the output
    (a tensor for the PyTorch runtimes, a NumPy array or an ORT binding for ONNX Runtime)."""

    runtime: str
    run: Callable[[], Any]
    detail: str = ""  # e.g. the ONNX Runtime provider

    def __call__(self) -> Any:
        return self.run()

    def output(self) -> torch.Tensor:
        """One forward pass's output as a CPU tensor (for comparing runtimes)."""
        y = self.run()
        if hasattr(y, "copy_outputs_to_cpu"):  # an IO binding (ONNX Runtime on CUDA)
            y = y.copy_outputs_to_cpu()[0]
        return y.detach().float().cpu() if isinstance(y, torch.Tensor) else torch.from_numpy(y).float()


def _compiled(model: nn.Module, x: torch.Tensor) -> Runner:
    torch.compiler.reset()  # a fresh Dynamo cache: each architecture compiles fully, never falls back to eager
    compiled = torch.compile(model, dynamic=False)
    log.debug("compiling %s for input shape %s", type(model).__name__, tuple(x.shape))
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            compiled(x)  # compile now, so the timer's warm-up is not spent compiling
    except (RuntimeError, OSError) as exc:  # a missing C++ compiler surfaces as a backend failure
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise RuntimeUnavailableError(
            f"torch.compile failed here ({first[:200]}); use runtime eager, or install a C++ compiler."
        ) from None
    return Runner("compile", lambda: compiled(x))


def ort_runner(session: Any, x: torch.Tensor, device: torch.device) -> Runner:
    """A :class:`Runner` feeding ``x`` to an ONNX Runtime ``session`` (on the GPU through IO binding for CUDA, so
    the timing is the model's, not host-device copies)."""
    name = session.get_inputs()[0].name
    if device.type != "cuda":
        feed = {name: x.detach().cpu().numpy()}
        return Runner("onnxruntime", lambda: session.run(None, feed)[0], "CPUExecutionProvider")
    import onnxruntime as ort

    index = device.index or 0
    value = ort.OrtValue.ortvalue_from_numpy(x.detach().cpu().numpy(), "cuda", index)
    binding = session.io_binding()
    binding.bind_ortvalue_input(name, value)
    binding.bind_output(session.get_outputs()[0].name, "cuda", index)

    def run() -> Any:
        session.run_with_iobinding(binding)
        return binding

    return Runner("onnxruntime", run, "CUDAExecutionProvider")


def prepare_runner(
    model: nn.Module, x: torch.Tensor, device: torch.device, runtime: str, threads: int = 1
) -> Runner:
    """A :class:`Runner` for ``model(x)`` under ``runtime``; ``model`` and ``x`` already on ``device``, eval mode.

    ``compile`` compiles here and ``onnxruntime`` exports and loads here (seconds), so timing starts warm.
    """
    check_runtime(runtime, device)
    if runtime == "eager":
        return Runner("eager", lambda: model(x))
    if runtime == "compile":
        return _compiled(model, x)
    return ort_runner(ort_session(onnx_bytes(model, x), device, threads), x, device)
