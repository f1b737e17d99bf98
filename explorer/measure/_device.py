"""Devices in one place: ``auto`` means CUDA when present, CPU otherwise; one label for reports and caches."""

from __future__ import annotations

import contextlib
import platform
from functools import cache
from pathlib import Path

import torch

from explorer.errors import DeviceError
from explorer.layout import DEVICE_CHOICES

_ONE_OF = ", ".join((*DEVICE_CHOICES, "cuda:N"))  # the names resolve_device takes, as its errors list them


def auto_device() -> torch.device:
    """``auto``: CUDA when present, the CPU otherwise."""
    return torch.device("cuda" if torch.cuda.is_available() else "cpu")


def resolve_device(name: str = "auto") -> torch.device:
    """Turn ``auto``/``cpu``/``cuda``/``cuda:N`` into a device, failing clearly when CUDA is absent."""
    if name == "auto":
        return auto_device()
    if name == "cpu":
        return torch.device("cpu")
    if name.startswith("cuda"):
        if not torch.cuda.is_available():
            raise DeviceError(
                f"device {name!r} was asked for but CUDA is not available here; use --device cpu or auto."
            )
        try:
            dev = torch.device(name)
        except RuntimeError:
            raise DeviceError(f"unknown device {name!r}; use one of {_ONE_OF}.") from None
        if dev.index is not None and dev.index >= torch.cuda.device_count():
            raise DeviceError(
                f"device {name!r} does not exist; {torch.cuda.device_count()} CUDA device(s) are visible."
            )
        return dev
    raise DeviceError(f"unknown device {name!r}; use one of {_ONE_OF}.")


def as_device(device: torch.device | str) -> torch.device:
    """A torch.device from either a device or a name (names go through :func:`resolve_device`): for the entry
    points only, where a user's words come in; everything below them takes a torch.device."""
    return resolve_device(device) if isinstance(device, str) else device


@cache
def cpu_model_name() -> str:
    """The CPU's model name from /proc/cpuinfo (Linux), else what the platform module knows."""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def device_label(device: torch.device, threads: int | None = None) -> str:
    """The hardware a figure was measured on: ``cuda (NVIDIA H200)`` or ``cpu (Intel Xeon ..., 2 threads)``.

    ``threads`` is added for CPUs when given (what a latency or a training speed depends on besides the chip).
    """
    if device.type == "cuda":
        return f"cuda ({torch.cuda.get_device_name(device)})"
    name = cpu_model_name()
    if threads is None:
        return f"{device.type} ({name})"
    return f"{device.type} ({name}, {threads} thread{'s' * (threads != 1)})"


def autocast(device: torch.device) -> contextlib.AbstractContextManager:
    """bf16 autocast for training on CUDA; a no-op on CPU (fp32 there is both faster and exact)."""
    if device.type == "cuda":
        return torch.autocast("cuda", dtype=torch.bfloat16)
    return contextlib.nullcontext()
