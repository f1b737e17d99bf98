"""Measuring a layout: training, evaluation, latency (and its cache), decoding, benches, the device.

The public names are listed in ``__init__.pyi`` and each is imported on first use."""

import lazy_loader

__getattr__, __dir__, __all__ = lazy_loader.attach_stub(__name__, __file__)
