"""Window views of a padded HWC tensor, shared by the executor and the MAC counter."""
from __future__ import annotations

import numpy as np
from numpy.lib.stride_tricks import sliding_window_view

from ..model.ir import Layer


def padded(x: np.ndarray, layer: Layer, fill: int) -> np.ndarray:
    """x (H, W, ...) surrounded by the layer's explicit padding, filled with `fill` (int64)."""
    top, left, bottom, right = layer.pad
    h, w = x.shape[:2]
    out = np.full((h + top + bottom, w + left + right) + x.shape[2:], fill, dtype=np.int64)
    out[top:top + h, left:left + w] = x
    return out


def windows(x: np.ndarray, layer: Layer) -> np.ndarray:
    """(OH, OW, kh, kw, ...) view of the kernel windows of an already padded tensor."""
    (sh, sw), oh, ow = layer.stride, *layer.out_shape[:2]
    view = sliding_window_view(x, layer.kernel, axis=(0, 1))     # (H', W', ..., kh, kw)
    view = view[:(oh - 1) * sh + 1:sh, :(ow - 1) * sw + 1:sw]
    return np.moveaxis(view, (-2, -1), (2, 3))


def valid_taps(layer: Layer) -> np.ndarray:
    """(OH, OW, kh, kw) mask of the kernel taps that fall inside the input (not on padding)."""
    h, w = layer.in_shape[:2]
    return windows(padded(np.ones((h, w), dtype=np.int64), layer, 0), layer).astype(bool)
