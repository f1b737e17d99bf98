"""Device selection in one place: ``auto`` means CUDA when present, CPU otherwise."""

from __future__ import annotations

import contextlib
import platform

import torch

from explorer.errors import DeviceError

__all__ = ["DEVICE_CHOICES", "autocast", "describe_device", "resolve_device"]

DEVICE_CHOICES = ("auto", "cpu", "cuda")


def resolve_device(name: str = "auto") -> torch.device:
    """Turn ``auto``/``cpu``/``cuda``/``cuda:N`` into a device, failing clearly when CUDA is absent."""
    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if name == "cpu":
        return torch.device("cpu")
    if name.startswith("cuda"):
        if not torch.cuda.is_available():
            raise DeviceError(
                f"device {name!r} was asked for but CUDA is not available here; use --device cpu or auto."
            )
        dev = torch.device(name)
        if dev.index is not None and dev.index >= torch.cuda.device_count():
            raise DeviceError(
                f"device {name!r} does not exist; {torch.cuda.device_count()} CUDA device(s) are visible."
            )
        return dev
    raise DeviceError(f"unknown device {name!r}; use one of auto, cpu, cuda, cuda:N.")


def describe_device(device: torch.device) -> str:
    """A human label for reports: the GPU's name, or the CPU's architecture and thread count."""
    if device.type == "cuda":
        return f"cuda ({torch.cuda.get_device_name(device)})"
    n = torch.get_num_threads()
    return f"cpu ({platform.machine()}, {n} thread{'s' * (n != 1)})"


def autocast(device: torch.device) -> contextlib.AbstractContextManager:
    """bf16 autocast for training on CUDA; a no-op on CPU (fp32 there is both faster and exact)."""
    if device.type == "cuda":
        return torch.autocast("cuda", dtype=torch.bfloat16)
    return contextlib.nullcontext()
