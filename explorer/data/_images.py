"""Images as images: ``[n, H, W]``, ``[n, H, W, C]`` or ``[n, C, H, W]`` cut into ``P x P`` patch tokens.

A patch is one position of the encoder (a learned position embedding per patch, as every position has), its
``P * P * C`` pixels flattened in row-major order, channels last; the patches run row-major over the grid. The
``[n, H, W]`` case is exactly how the digits task has always cut its 8x8 images.

:func:`patch_images` checks at the door: a patch size that does not divide both sides is one error naming the
sizes that do, and the image and patch sizes are bounded (:data:`MAX_SIDE`, :data:`MAX_TOKENS`).
"""

from __future__ import annotations

import dataclasses
import math

import numpy as np

from explorer.data._base import Task
from explorer.errors import ConfigError, DataError

IMAGE_LAYOUTS = ("hwc", "chw")  # [n, H, W, C] (channels last, the default) or [n, C, H, W] (PyTorch's)
MAX_SIDE = 4096  # pixels per image side
MAX_TOKENS = 16384  # patches per image: the encoder attends over every pair of them


def valid_patches(h: int, w: int) -> list[int]:
    """Patch sides that tile an ``h x w`` image."""
    g = math.gcd(h, w)
    return [p for p in range(1, g + 1) if g % p == 0]


def _as_hwc(X: np.ndarray, layout: str, key: str) -> np.ndarray:
    """``X`` as ``[n, H, W, C]``."""
    if X.ndim == 3:
        return X[..., None]
    if X.ndim == 4:
        return X.transpose(0, 2, 3, 1) if layout == "chw" else X
    raise DataError(
        f"{key} has shape {X.shape}; with a patch option it must be images [n, H, W], [n, H, W, C] or, with "
        "layout = 'chw', [n, C, H, W]."
    )


def patch_images(
    X: np.ndarray, patch: object, layout: object = "hwc", key: str = "X"
) -> tuple[np.ndarray, tuple[int, int, int]]:
    """``X`` images -> ``[n, (H/P) * (W/P), P * P * C]`` float32 patches, and the images' ``(H, W, C)``."""
    if layout not in IMAGE_LAYOUTS:
        raise ConfigError(f"task option layout must be one of {', '.join(IMAGE_LAYOUTS)}, got {layout!r}.")
    if isinstance(patch, bool) or not isinstance(patch, (int, np.integer)) or patch < 1:
        raise ConfigError(
            f"task option patch must be a positive integer (pixels per patch side), got {patch!r}."
        )
    X = np.asarray(X)
    if not (np.issubdtype(X.dtype, np.number) or X.dtype == bool) or np.iscomplexobj(X):
        raise DataError(f"{key} has dtype {X.dtype}; images must be real numbers ({key}.astype(np.float32)).")
    images = _as_hwc(X, str(layout), key)
    n, h, w, c = images.shape
    if min(h, w, c) < 1 or max(h, w) > MAX_SIDE:
        raise DataError(
            f"{key} holds {h} x {w} images of {c} channel(s); each side must be 1..{MAX_SIDE} pixels."
        )
    p = int(patch)
    if h % p or w % p:
        sizes = ", ".join(map(str, valid_patches(h, w)))
        raise ConfigError(
            f"task option patch = {p} does not divide the {h} x {w} images; choose one of {sizes}."
        )
    gh, gw = h // p, w // p
    if gh * gw > MAX_TOKENS:
        raise ConfigError(
            f"patch = {p} cuts {h} x {w} images into {gh * gw:,} patches, above the {MAX_TOKENS:,} an encoder "
            "attends over here; choose a larger patch."
        )
    x = images.reshape(n, gh, p, gw, p, c)  # [n, grid_row, row_in_patch, grid_col, col_in_patch, C]
    x = x.transpose(0, 1, 3, 2, 4, 5).reshape(n, gh * gw, p * p * c)  # [n, T, P*P*C]
    return x.astype(np.float32, copy=False), (h, w, c)


def with_image(task: Task, image: tuple[int, int, int], patch: int) -> Task:
    """``task`` whose input spec records the images its patches were cut from (for reports and exports)."""
    return dataclasses.replace(
        task, spec=dataclasses.replace(task.spec, image=tuple(image), patch=int(patch))
    )
