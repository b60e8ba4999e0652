"""Grayscale canvases: accept numpy arrays and PIL images, give back the same kind.

Chest X-rays are single-channel. An intervention works on one 2-D plane and returns the input's
type: a 2-D array of the same dtype, or a PIL image of the same mode (an RGB input — three equal
channels, as the authors' loaders produced — is processed on its luminance and returned with
the result broadcast to the three channels).

:func:`prepare` turns an image into a :class:`Canvas` once; every intervention accepts the canvas
in place of the image and reuses what it has already computed (the grayscale plane, its value
histogram), so a runner that applies a whole condition set to one image converts and counts its
pixels once.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Union

import numpy as np
from PIL import Image

__all__ = ["ImageLike", "Canvas", "prepare", "to_canvas", "value_range", "finish", "unchanged"]

_PIL_GRAY_MODES = {"L": np.uint8, "I;16": np.uint16, "I": np.int32, "F": np.float32}
_SUPPORTED_DTYPES = "uint8, uint16, int32 or float"


@dataclass(eq=False)
class Canvas:
    """A 2-D plane plus how to turn a processed plane back into the caller's type.

    A canvas also memoises per-image work that does not depend on the intervention (the integer
    histogram behind the matched-noise statistics): build it once with :func:`prepare` and pass
    it to every intervention of that image. The plane is never modified in place.
    """

    plane: np.ndarray
    pil_mode: str | None = None
    source: Any = field(default=None, repr=False)
    memo: dict[str, Any] = field(default_factory=dict, repr=False)

    @property
    def height(self) -> int:
        return int(self.plane.shape[0])

    @property
    def width(self) -> int:
        return int(self.plane.shape[1])

    def restore(self, plane: np.ndarray) -> ImageLike:
        """Return ``plane`` in the type and mode of the original input."""
        if self.pil_mode is None:
            return plane
        if self.pil_mode in _PIL_GRAY_MODES:
            return Image.fromarray(plane, mode=self.pil_mode) if self.pil_mode != "I;16" else _from_uint16(plane)
        return Image.fromarray(plane, mode="L").convert(self.pil_mode)


def _from_uint16(plane: np.ndarray) -> Image.Image:
    image = Image.new("I;16", (plane.shape[1], plane.shape[0]))
    image.frombytes(np.ascontiguousarray(plane, dtype="<u2").tobytes())
    return image


ImageLike = Union[np.ndarray, Image.Image, Canvas]


def prepare(image: ImageLike, field: str = "image") -> Canvas:
    """Validate and convert ``image`` once, for several interventions of the same image.

    Interventions given the returned canvas return the type of the original image, and compute
    the image's noise statistics once for all of them.

    >>> from shovir.perturb import full_noise, oco
    >>> canvas = prepare(Image.new("L", (32, 32), 90))
    >>> isinstance(oco(canvas, [(4, 4, 12, 12)], 1.0, rng=0), Image.Image)
    True
    >>> full_noise(canvas, rng=0).size, sorted(canvas.memo)
    ((32, 32), ['histogram'])
    """
    return to_canvas(image, field)


def to_canvas(image: ImageLike, field: str = "image") -> Canvas:
    """Wrap ``image`` as a grayscale :class:`Canvas`; raise ``ValueError`` for unsupported input.

    >>> to_canvas(np.zeros((4, 5), np.uint16)).plane.shape
    (4, 5)
    >>> to_canvas(np.zeros((4, 5, 3), np.uint8))
    Traceback (most recent call last):
    ...
    ValueError: image: expected a 2-D grayscale array (height, width), got shape (4, 5, 3); convert colour input with PIL's .convert('L') first
    """
    if isinstance(image, Canvas):
        return image
    if isinstance(image, Image.Image):
        if image.mode in _PIL_GRAY_MODES:
            return Canvas(np.asarray(image, dtype=_PIL_GRAY_MODES[image.mode]), image.mode, image)
        if image.mode in ("RGB", "RGBA", "LA", "P", "1"):
            return Canvas(np.asarray(image.convert("L"), dtype=np.uint8), image.mode, image)
        raise ValueError(f"{field}: unsupported PIL mode {image.mode!r}; expected L, I;16, I, F or RGB")
    if not isinstance(image, np.ndarray):
        raise ValueError(f"{field}: expected a numpy array or a PIL image, got {type(image).__name__}")
    if image.ndim != 2:
        raise ValueError(
            f"{field}: expected a 2-D grayscale array (height, width), got shape {image.shape}; "
            "convert colour input with PIL's .convert('L') first"
        )
    if image.size == 0:
        raise ValueError(f"{field}: the image is empty (shape {image.shape})")
    if image.dtype.kind == "f":
        if not np.isfinite(image).all():
            raise ValueError(f"{field}: the float image contains NaN or infinite values")
    elif image.dtype not in (np.uint8, np.uint16, np.int32):
        raise ValueError(f"{field}: unsupported dtype {image.dtype}; expected {_SUPPORTED_DTYPES}")
    return Canvas(image, None, image)


def value_range(plane: np.ndarray) -> tuple[float, float]:
    """The values an output pixel may take: the dtype's range for integers, the image's own
    range for floats (a [0, 1] float image stays in [0, 1]).

    >>> value_range(np.zeros((2, 2), np.uint16))
    (0.0, 65535.0)
    >>> value_range(np.array([[0.25, 0.75]], np.float32))
    (0.25, 0.75)
    """
    if plane.dtype.kind in "iu":
        info = np.iinfo(plane.dtype)
        return float(info.min), float(info.max)
    return float(plane.min()), float(plane.max())


def finish(values: np.ndarray, dtype: np.dtype, bounds: tuple[float, float]) -> np.ndarray:
    """Clip to ``bounds`` and cast to ``dtype``, rounding half to even for integer types.

    The authors' ``astype(uint8)`` truncated (a value of 254.9 became 254); this rounds.

    >>> finish(np.array([254.6, -3.0, 300.0]), np.dtype(np.uint8), (0, 255)).tolist()
    [255, 0, 255]
    """
    clipped = np.clip(values, bounds[0], bounds[1])
    if np.dtype(dtype).kind in "iu":
        clipped = np.rint(clipped)
    return clipped.astype(dtype, copy=False)


def unchanged(image: ImageLike) -> ImageLike:
    """A copy of ``image`` with identical bytes: what every intervention returns at p = 0.

    >>> unchanged(np.arange(4, dtype=np.uint8).reshape(2, 2)).tolist()
    [[0, 1], [2, 3]]
    """
    canvas = to_canvas(image)  # same validation as a real intervention
    return canvas.source.copy()
