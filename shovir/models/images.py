"""Image conversion for model inputs: 8-bit, lossless, grayscale kept grayscale.

Defect of the reference code avoided here (reference §9): **grayscale stays grayscale and 16-bit
input is normalised explicitly** (:func:`to_8bit`), instead of leaving the conversion to whatever
a processor does with an ``I;16`` image; :func:`to_rgb` only repeats the one channel when a model
needs three.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from PIL import Image

__all__ = ["to_8bit", "to_rgb"]

_HIGH_BIT_MODES = {"I;16", "I;16B", "I;16L", "I;16N", "I", "F"}


def to_8bit(image: Any, *, field: str = "images") -> Image.Image:
    """An 8-bit PIL image: ``L`` for grayscale inputs, ``RGB`` for colour ones.

    ``L`` and ``RGB`` pass through unchanged. 16-bit and 32-bit grayscale (``I;16``, ``I``, ``F``,
    e.g. PadChest PNGs) are min–max scaled to 0–255 with *rounding* (a constant image becomes all
    zeros, as in the authors' base normalisation, reference §4.1); ``1``/``LA`` become ``L``, other
    modes ``RGB``. No lossy step is involved.

    >>> to_8bit(Image.new("L", (2, 2), 7)).getpixel((0, 0))
    7
    >>> wide = Image.fromarray(np.array([[0, 1000], [3000, 4000]], dtype=np.uint16))
    >>> np.asarray(to_8bit(wide)).tolist()
    [[0, 64], [191, 255]]
    """
    if not isinstance(image, Image.Image):
        raise ValueError(f"{field}: expected a PIL image, got {type(image).__name__}")
    mode = image.mode
    if mode in ("L", "RGB"):
        return image
    if mode in _HIGH_BIT_MODES:
        values = np.asarray(image, dtype=np.float64)
        low, high = float(values.min()), float(values.max())
        scaled = (values - low) / (high - low) * 255.0 if high > low else np.zeros_like(values)
        return Image.fromarray(np.rint(scaled).astype(np.uint8), mode="L")
    if mode in ("1", "LA", "La"):
        return image.convert("L")
    return image.convert("RGB")


def to_rgb(image: Any, *, field: str = "images") -> Image.Image:
    """:func:`to_8bit`, then three equal channels for a grayscale image (lossless).

    >>> to_rgb(Image.new("L", (1, 1), 9)).getpixel((0, 0))
    (9, 9, 9)
    """
    return to_8bit(image, field=field).convert("RGB")
