"""The models: explorer's encoder and its attention, user models, transformers classes, saved model files.

The public names are listed in ``__init__.pyi`` and each is imported on first use."""

import lazy_loader

__getattr__, __dir__, __all__ = lazy_loader.attach_stub(__name__, __file__)
