"""Head surgery on a trained transformers model: a plan of the heads each layer keeps, the model cut to it, its
recovery by a short budget of distillation and training, and a checkpoint ``from_pretrained`` loads (Llama causal
LMs and BERT encoders).

The public names are listed in ``__init__.pyi`` and each is imported on first use."""

import lazy_loader

__getattr__, __dir__, __all__ = lazy_loader.attach_stub(__name__, __file__)
