"""What a layout is: model and run configs, the head rules and schedules, the grid of layouts a spec allows.

The public names are listed in ``__init__.pyi`` and each is imported on first use."""

import lazy_loader

__getattr__, __dir__, __all__ = lazy_loader.attach_stub(__name__, __file__)
