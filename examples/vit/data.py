"""A data loader of your own, for explorer's ``[task] name = "examples/vit/data.py:load"``.

It returns images as images (``[n, 8, 8]``, pixels in [0, 1]) with their labels; the spec's ``patch = 2``
option has explorer cut them into 16 patches of 2 x 2 pixels. Here the images are scikit-learn's bundled 8x8
digits (no download); yours would come from your own files.
"""

from __future__ import annotations

import numpy as np
from sklearn.datasets import load_digits


def load(limit: int | None = None) -> dict[str, np.ndarray]:
    """Images ``X`` [n, 8, 8] (float32) and labels ``y`` [n]; ``limit`` keeps the first ``limit`` images."""
    digits = load_digits()
    X = (digits.images / 16.0).astype(np.float32)
    y = digits.target.astype(np.int64)
    return {"X": X[:limit], "y": y[:limit]}
