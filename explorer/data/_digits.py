"""``digits``: scikit-learn's bundled 8x8 handwritten digits as a small ViT-style patch sequence.

Real data with no download: ``sklearn.datasets.load_digits`` reads 1,797 images (10 classes) shipped inside
scikit-learn. Each image is cut into non-overlapping ``patch x patch`` patches in row-major order, each patch
flattened into one position's features, and pixels (0..16) are scaled to [0, 1]:

* ``patch=2`` (default): 16 positions of 4 features;
* ``patch=4``: 4 positions of 16 features;  ``patch=1``: 64 positions of 1 feature.

The split is seeded and stratified by class, 70/15/15, and depends only on ``seed``:
1,257 train / 270 val / 270 test.
"""

from __future__ import annotations

import numpy as np

from explorer.data._base import Task
from explorer.data._images import patch_images, with_image
from explorer.data._npz import task_from_arrays
from explorer.errors import ConfigError

PATCHES = (1, 2, 4)  # patch sizes that tile an 8x8 image
_SIDE = 8


def patchify(images: np.ndarray, patch: int) -> np.ndarray:
    """``[n, 8, 8]`` images -> ``[n, (8 / patch)^2, patch^2]`` patches, row-major over the patch grid (the cut
    every image task uses: :func:`explorer.data._images.patch_images`)."""
    return patch_images(images, patch)[0]


def load_digits_task(*, seed: int = 0, patch: int = 2) -> Task:
    """The digits task with ``patch x patch`` patches and a split fixed by ``seed``."""
    from sklearn.datasets import load_digits

    if isinstance(patch, bool) or patch not in PATCHES:
        raise ConfigError(
            f"digits option patch must be one of {', '.join(map(str, PATCHES))}, got {patch!r}."
        )
    data = load_digits()
    X = patchify(data.images.astype(np.float32) / 16.0, patch)
    description = (
        f"sklearn 8x8 digits, {patch}x{patch} patches ({X.shape[1]} positions x {X.shape[2]} features)"
    )
    task = task_from_arrays("digits", X, data.target.astype(np.int64), seed=seed, description=description)
    return with_image(task, (_SIDE, _SIDE, 1), patch)
