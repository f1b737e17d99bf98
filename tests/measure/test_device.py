"""explorer.measure._device: devices from names, and the label that says what a figure was measured on."""

from __future__ import annotations

import pytest
import torch

from explorer.errors import DeviceError
from explorer.measure import as_device, auto_device, cpu_model_name, device_label


def test_as_device_takes_a_device_as_it_is_and_resolves_a_name():
    cpu = torch.device("cpu")
    assert as_device(cpu) is cpu and as_device("cpu") == cpu
    assert as_device("auto").type == ("cuda" if torch.cuda.is_available() else "cpu")
    assert auto_device() == as_device("auto") and auto_device().index is None  # the default CUDA device
    with pytest.raises(DeviceError, match="unknown device 'tpu'"):
        as_device("tpu")


def test_the_device_label_names_the_cpu_model_and_its_threads():
    name = cpu_model_name()
    assert name and name == cpu_model_name()  # read once, the same each time
    cpu = torch.device("cpu")
    assert device_label(cpu) == f"cpu ({name})"
    assert (
        device_label(cpu, 1) == f"cpu ({name}, 1 thread)"
        and device_label(cpu, 4) == f"cpu ({name}, 4 threads)"
    )
