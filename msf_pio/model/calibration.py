"""Calibration inputs for post-training quantization of float models: real data from .npy/.npz
files (or a folder of them), or seeded random images in a declared input range (with a one-line
warning, since activation ranges then describe noise, not the model's data)."""
from __future__ import annotations

import sys
import zipfile
from pathlib import Path

import numpy as np

from ..errors import MsfError

DEFAULT_RANGE = (-1.0, 1.0)


def load_calibration(ref: str | Path, shape: tuple[int, int, int]) -> np.ndarray:
    """A float batch (N, H, W, C) from an .npy/.npz file or a folder of them; each array is one
    image (H, W, C) or a batch (N, H, W, C) (NCHW batches are transposed)."""
    path = Path(ref)
    if path.is_dir():
        files = sorted(p for p in path.iterdir() if p.suffix in (".npy", ".npz"))
        if not files:
            raise MsfError("folder has no .npy or .npz calibration arrays", source=str(path))
    elif path.is_file():
        files = [path]
    else:
        raise MsfError("no such calibration file or folder", source=str(path))
    batches = [_batch(a, shape, where, f) for f in files for where, a in _arrays(f)]
    return np.concatenate(batches).astype(np.float32)


def _arrays(path: Path):
    try:
        if path.suffix == ".npz":
            with np.load(path, allow_pickle=False) as npz:
                return [(key, npz[key]) for key in npz.files]
        return [(None, np.load(path, allow_pickle=False))]
    except (OSError, ValueError, zipfile.BadZipFile) as exc:
        raise MsfError(f"cannot read calibration arrays ({exc})", source=str(path)) from None


def _batch(a: np.ndarray, shape, where: str | None, path: Path) -> np.ndarray:
    h, w, c = shape
    if not (np.issubdtype(a.dtype, np.floating) or np.issubdtype(a.dtype, np.integer)):
        raise MsfError(f"calibration data must be numeric, got {a.dtype}", source=str(path),
                       where=where)
    if a.shape == (h, w, c):
        a = a[None]
    elif a.ndim == 4 and a.shape[1:] == (c, h, w) and a.shape[1:] != (h, w, c):
        a = a.transpose(0, 2, 3, 1)
    if a.ndim != 4 or a.shape[1:] != (h, w, c) or a.shape[0] == 0:
        raise MsfError(f"calibration arrays must be images {[h, w, c]} (HWC) or batches "
                       f"[N, {h}, {w}, {c}], got {list(a.shape)}", source=str(path), where=where)
    if not np.isfinite(a).all():
        raise MsfError("calibration data contains NaN or infinity", source=str(path),
                       where=where)
    return a.astype(np.float32)


def parse_input_range(text: str, where: str = "--input-range") -> tuple[float, float]:
    """'LO,HI' (e.g. '0,1' or '-1,1') -> (lo, hi) with lo < hi."""
    try:
        lo, hi = (float(v) for v in str(text).split(","))
    except ValueError:
        raise MsfError(f"must be LO,HI such as 0,1 or -1,1, got {text!r}", where=where) from None
    if not (np.isfinite(lo) and np.isfinite(hi) and lo < hi):
        raise MsfError(f"must be two finite numbers LO < HI, got {text!r}", where=where)
    return lo, hi


def warn_random_calibration(model_source: str, input_range: tuple[float, float]) -> None:
    """One line on stderr (the PlatformIO build log) when a real model is calibrated on noise."""
    lo, hi = input_range
    print(f"msf-pio: warning: {model_source}: quantizing with random calibration images in "
          f"[{lo:g}, {hi:g}]; give real inputs with --calibration FILE|DIR for accurate scales",
          file=sys.stderr)
