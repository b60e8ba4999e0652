"""Matched Gaussian noise: the fill of every ShoViR intervention (paper §3.2 and Suppl. §B).

For each image the noise mean and standard deviation are estimated from the pixels whose
intensity lies between the 1st and 99th percentiles, so that the noise keeps the image's
intensity profile but none of its structure. Statistics come from an exact integer histogram
for 8- and 16-bit images (one pass, no sort), which reproduces ``np.percentile`` (linear
interpolation) bit for bit in the cut points.

Where the paper and the authors' code (reference code §4.2–4.3, §4.5, §4.7) differ, the default
follows the paper and :class:`NoiseModel` exposes the authors' choice:

=====================  ======================================  =====================================
aspect                 paper (default)                         authors' code (``NoiseModel.authors()``)
=====================  ======================================  =====================================
centre                 mean of the trimmed pixels              median of the trimmed pixels
spatial blur of noise  none ("Gaussian noise")                 PIL GaussianBlur radius 2
box edges              linear blend with strength p            alpha blurred with radius 6 (feather)
scale floor            none                                    std floored at 1.0 (8-bit units)
statistics region      paper silent → pixels outside the       pixels outside the occluded union
                       occluded region (authors' choice)       (whole image for full noise)
RO noise               the same model as OCO/DOCO              ``NoiseModel.authors_ro()``: untrimmed
                       (a matched control)                     whole-image mean/std, no blur/feather
colour                 one channel, broadcast                  three independent channels
integer casts          rounding                                truncation (``astype(uint8)``)
=====================  ======================================  =====================================

Two consequences worth knowing when comparing with published numbers: a Gaussian blur of
σ = 2 divides the standard deviation of white noise by ``2·√π·σ ≈ 7.1``, so the authors' "matched"
fill is much flatter than the image it is matched to; and feathering leaks noise up to ~3σ
(18 px) outside each box while weakening it just inside the edges.
"""

from __future__ import annotations

import functools
import math
import statistics
from dataclasses import dataclass
from typing import Literal, Sequence

import numpy as np

from shovir.perturb._image import Canvas, ImageLike, finish, to_canvas, unchanged, value_range
from shovir.perturb._rng import as_generator

__all__ = [
    "NOISE_SAMPLER",
    "NoiseModel",
    "NoiseStats",
    "noise_statistics",
    "normal_levels",
    "gaussian_blur",
    "full_noise",
    "blend_noise",
]

Rect = tuple[int, int, int, int]  # (y0, y1, x0, x1), end-exclusive, inside the image
_CHUNK = 1 << 18  # bincount over cache-sized chunks: ~10x faster than one call on a whole frame


@dataclass(frozen=True)
class NoiseModel:
    """How matched noise is estimated, drawn and blended.

    Args:
        center: ``"mean"`` (paper §3.2) or ``"median"`` (authors' code) of the trimmed pixels.
        percentiles: the trimming cut points (paper: 1st and 99th).
        stats_region: ``"outside"`` estimates the statistics from the pixels outside the
            occluded region (so the hidden finding cannot leak its intensity into the fill);
            ``"image"`` uses every pixel. Full-noise images always use every pixel.
        blur_sigma: standard deviation (pixels) of a Gaussian blur of the noise; 0 = white noise.
        feather_sigma: standard deviation of a Gaussian blur of the blend mask; 0 = hard edges.
        min_scale: floor of the noise standard deviation, in the image's units.
        trim: apply the percentile trimming (``False`` = plain mean/std of all pixels).
    """

    center: Literal["mean", "median"] = "mean"
    percentiles: tuple[float, float] = (1.0, 99.0)
    stats_region: Literal["outside", "image"] = "outside"
    blur_sigma: float = 0.0
    feather_sigma: float = 0.0
    min_scale: float = 0.0
    trim: bool = True

    def __post_init__(self) -> None:
        if self.center not in ("mean", "median"):
            raise ValueError(f"NoiseModel.center must be 'mean' or 'median', got {self.center!r}")
        if self.stats_region not in ("outside", "image"):
            raise ValueError(f"NoiseModel.stats_region must be 'outside' or 'image', got {self.stats_region!r}")
        low, high = self.percentiles
        if not 0.0 <= low < high <= 100.0:
            raise ValueError(f"NoiseModel.percentiles must satisfy 0 <= low < high <= 100, got {self.percentiles!r}")
        for name in ("blur_sigma", "feather_sigma", "min_scale"):
            value = getattr(self, name)
            if not (math.isfinite(value) and value >= 0):
                raise ValueError(f"NoiseModel.{name} must be a finite number >= 0, got {value!r}")

    @classmethod
    def paper(cls) -> "NoiseModel":
        """The default: the paper's text (trimmed mean/std, white noise, linear blend)."""
        return cls()

    @classmethod
    def authors(cls) -> "NoiseModel":
        """The authors' ``_matched_correlated_noise_fill`` + ``_blend_region`` (OCO/DOCO, full noise).

        Full-noise images in the authors' code were not feathered; :func:`full_noise` ignores
        ``feather_sigma`` for that reason.
        """
        return cls(center="median", blur_sigma=2.0, feather_sigma=6.0, min_scale=1.0)

    @classmethod
    def authors_ro(cls) -> "NoiseModel":
        """The authors' RO fill: untrimmed whole-image mean/std, white noise, hard edges."""
        return cls(center="mean", stats_region="image", min_scale=1.0, trim=False)

    @property
    def margin(self) -> int:
        """Pixels around the occluded region that blurring can reach."""
        return int(math.ceil(3.0 * max(self.blur_sigma, self.feather_sigma)))


@dataclass(frozen=True)
class NoiseStats:
    """The centre and scale of the matched noise, plus what they were estimated from."""

    center: float
    scale: float
    low: float
    high: float
    n_pixels: int


def _chunked_bincount(flat: np.ndarray, nbins: int, offset: int = 0) -> np.ndarray:
    counts = np.zeros(nbins, dtype=np.int64)
    for start in range(0, flat.size, _CHUNK):
        chunk = flat[start : start + _CHUNK]
        if offset:
            chunk = chunk.astype(np.int64) - offset
        counts += np.bincount(chunk, minlength=nbins)
    return counts


def _histogram_order_statistic(cumulative: np.ndarray, k: np.ndarray) -> np.ndarray:
    return np.searchsorted(cumulative, k, side="right")


def _histogram_percentile(counts: np.ndarray, q: float) -> float:
    """``np.percentile(values, q)`` (linear method) from the histogram of integer values."""
    cumulative = np.cumsum(counts)
    n = int(cumulative[-1])
    position = (n - 1) * q / 100.0
    k0 = math.floor(position)
    fraction = position - k0
    v0, v1 = _histogram_order_statistic(cumulative, np.array([k0, min(k0 + 1, n - 1)]))
    return float(v0 + fraction * (v1 - v0))


def _stats_from_histogram(counts: np.ndarray, offset: int, model: NoiseModel) -> NoiseStats:
    values = np.arange(counts.size, dtype=np.float64)
    if model.trim:
        low = _histogram_percentile(counts, model.percentiles[0])
        high = _histogram_percentile(counts, model.percentiles[1])
        kept = counts.copy()
        kept[: int(math.ceil(low))] = 0
        kept[int(math.floor(high)) + 1 :] = 0
    else:
        low, high, kept = 0.0, float(counts.size - 1), counts
    total = int(kept.sum())
    mean = float((kept * values).sum() / total)
    variance = float((kept * (values - mean) ** 2).sum() / total)
    center = mean if model.center == "mean" else _histogram_percentile(kept, 50.0)
    scale = max(math.sqrt(variance), model.min_scale)
    return NoiseStats(center + offset, scale, low + offset, high + offset, total)


def _stats_from_values(values: np.ndarray, model: NoiseModel) -> NoiseStats:
    values = values.astype(np.float64, copy=False)
    if model.trim:
        low, high = (float(v) for v in np.percentile(values, model.percentiles))
        kept = values[(values >= low) & (values <= high)]
    else:
        low, high, kept = float(values.min()), float(values.max()), values
    center = float(kept.mean()) if model.center == "mean" else float(np.median(kept))
    return NoiseStats(center, max(float(kept.std()), model.min_scale), low, high, int(kept.size))


def _integer_histogram(plane: np.ndarray) -> tuple[np.ndarray, int] | None:
    if plane.dtype == np.uint8:
        return _chunked_bincount(plane.ravel(), 256), 0
    if plane.dtype == np.uint16:
        return _chunked_bincount(plane.ravel(), 65536), 0
    if plane.dtype.kind in "iu":
        low, high = int(plane.min()), int(plane.max())
        if high - low < (1 << 22):
            return _chunked_bincount(plane.ravel(), high - low + 1, offset=low), low
    return None


def _canvas_histogram(canvas: Canvas) -> tuple[np.ndarray, int] | None:
    # every condition of an image starts from the same whole-image histogram: count it once
    if "histogram" not in canvas.memo:
        canvas.memo["histogram"] = _integer_histogram(canvas.plane)
    return canvas.memo["histogram"]


def _plane_stats(canvas: Canvas, model: NoiseModel, excluded: np.ndarray | None = None, rect: Rect | None = None) -> NoiseStats:
    """Statistics of the canvas's plane minus the pixels where ``excluded`` (a mask over ``rect``) is True."""
    plane = canvas.plane
    histogram = _canvas_histogram(canvas)
    if histogram is not None:
        counts, offset = histogram
        if excluded is not None:
            y0, y1, x0, x1 = rect
            inside = plane[y0:y1, x0:x1][excluded]
            remaining = counts - _chunked_bincount(inside, counts.size, offset)
            if remaining.sum() > 0:
                counts = remaining
        return _stats_from_histogram(counts, offset, model)
    if excluded is not None:
        full = np.ones(plane.shape, dtype=bool)
        y0, y1, x0, x1 = rect
        full[y0:y1, x0:x1] &= ~excluded
        if full.any():
            return _stats_from_values(plane[full], model)
    return _stats_from_values(plane.ravel(), model)


def noise_statistics(image: ImageLike, exclude: np.ndarray | None = None, model: NoiseModel = NoiseModel()) -> NoiseStats:
    """Matched-noise statistics of ``image`` (ShoViR §3.2): centre and scale of the pixels between
    the ``model.percentiles`` cut points, optionally leaving out the pixels where ``exclude`` is True.

    If every pixel is excluded the whole image is used, as the authors' code did.

    >>> image = np.arange(100, dtype=np.uint8).reshape(10, 10)
    >>> stats = noise_statistics(image)
    >>> round(stats.low, 2), round(stats.high, 2), stats.n_pixels, stats.center
    (0.99, 98.01, 98, 49.5)
    >>> round(noise_statistics(image.astype(np.float32)).scale, 4) == round(stats.scale, 4)
    True
    """
    canvas = to_canvas(image)
    if exclude is None:
        return _plane_stats(canvas, model)
    exclude = np.asarray(exclude, dtype=bool)
    if exclude.shape != canvas.plane.shape:
        raise ValueError(f"exclude: mask shape {exclude.shape} does not match the image shape {canvas.plane.shape}")
    return _plane_stats(canvas, model, exclude, (0, canvas.height, 0, canvas.width))


def _gaussian_kernel(sigma: float) -> np.ndarray:
    radius = max(1, int(math.ceil(3.0 * sigma)))
    offsets = np.arange(-radius, radius + 1, dtype=np.float64)
    kernel = np.exp(-0.5 * (offsets / sigma) ** 2)
    return kernel / kernel.sum()


def gaussian_blur(plane: np.ndarray, sigma: float) -> np.ndarray:
    """Separable Gaussian blur (kernel truncated at 3σ, mirrored edges), float32 out.

    Stands in for PIL's ``GaussianBlur(radius=sigma)`` of the authors' code (PIL's radius is the
    standard deviation), on 16-bit and float data too.

    >>> spike = np.zeros((9, 9), np.float32); spike[4, 4] = 1
    >>> blurred = gaussian_blur(spike, 1.0)
    >>> round(float(blurred.sum()), 5), bool(blurred[4, 4] < 1)
    (1.0, True)
    """
    if sigma <= 0:
        return plane.astype(np.float32, copy=True)
    kernel = _gaussian_kernel(sigma).astype(np.float32)
    radius = kernel.size // 2
    out = plane.astype(np.float32, copy=True)
    for axis in (0, 1):
        if out.shape[axis] <= radius:
            pad_mode = "edge"
        else:
            pad_mode = "reflect"
        pad = [(0, 0), (0, 0)]
        pad[axis] = (radius, radius)
        padded = np.pad(out, pad, mode=pad_mode)
        length = out.shape[axis]
        acc = np.zeros_like(out)
        for k, weight in enumerate(kernel):
            window = padded[k : k + length, :] if axis == 0 else padded[:, k : k + length]
            acc += weight * window
        out = acc
    return out


def _work_dtype(dtype: np.dtype) -> type:
    # float32 represents every uint8/uint16 value exactly; wider types need float64.
    return np.float32 if np.dtype(dtype) in (np.uint8, np.uint16, np.float32, np.float16) else np.float64


_LEVEL_BITS = 16
NOISE_SAMPLER = "normal-levels-16"
"""Names the way matched noise is drawn from a generator; a runner keys cached generations of
perturbed images by it, so images drawn another way are never mistaken for these."""


@functools.lru_cache(maxsize=1)
def normal_levels() -> np.ndarray:
    """The standard normal as 2^16 equiprobable levels: the inverse CDF at the midpoints of
    2^16 equal probability bins, rescaled to unit variance (ascending, float64).

    Matched noise is drawn by picking levels with uniform 16-bit integers: the same Gaussian to
    within 1.1·10⁻⁵ in the CDF (tails cut at ±4.3σ, a share of 1.5·10⁻⁵ of the draws), for a third of
    the cost of the ziggurat sampler on a 2544×3056 frame, and with the centre, scale, clipping
    and rounding applied to 65,536 levels instead of to every pixel.

    >>> levels = normal_levels()
    >>> levels.size, round(float(levels.mean()), 12), round(float(levels.var()), 12), round(float(levels[-1]), 2)
    (65536, 0.0, 1.0, 4.33)
    """
    count = 1 << _LEVEL_BITS
    inverse = statistics.NormalDist().inv_cdf
    upper = np.array([inverse((i + 0.5) / count) for i in range(count // 2, count)])
    levels = np.concatenate([-upper[::-1], upper])
    levels /= math.sqrt(float(np.mean(levels**2)))
    levels.flags.writeable = False
    return levels


def _noise_levels(stats: NoiseStats, dtype: type) -> np.ndarray:
    return (stats.center + stats.scale * normal_levels()).astype(dtype)


def _level_indices(rng: np.random.Generator, shape: int | tuple[int, ...]) -> np.ndarray:
    return rng.integers(0, 1 << _LEVEL_BITS, size=shape, dtype=np.uint16)


def _draw(rng: np.random.Generator, shape: int | tuple[int, ...], stats: NoiseStats, dtype: type) -> np.ndarray:
    return _noise_levels(stats, dtype).take(_level_indices(rng, shape))


def blend_noise(
    canvas: Canvas,
    rects: Sequence[Rect],
    p: float,
    rng: np.random.Generator,
    model: NoiseModel,
) -> tuple[np.ndarray, int]:
    """Blend matched noise into the union of ``rects`` with strength ``p``; return the new plane
    and the number of pixels in the union.

    Work is confined to the bounding rectangle of the union (plus the blur margin): noise is only
    ever drawn where it is used. Output = ``x + α·(n − x)`` with ``α = p`` on the union (feathered
    when ``model.feather_sigma > 0``), noise clipped to the valid range before blending.
    """
    plane = canvas.plane
    rects = [r for r in rects if r[1] > r[0] and r[3] > r[2]]
    if p <= 0 or not rects:
        return plane.copy(), 0
    height, width = plane.shape
    margin = model.margin
    y0 = max(0, min(r[0] for r in rects) - margin)
    y1 = min(height, max(r[1] for r in rects) + margin)
    x0 = max(0, min(r[2] for r in rects) - margin)
    x1 = min(width, max(r[3] for r in rects) + margin)
    region = (y0, y1, x0, x1)
    mask = np.zeros((y1 - y0, x1 - x0), dtype=bool)
    for ry0, ry1, rx0, rx1 in rects:
        mask[ry0 - y0 : ry1 - y0, rx0 - x0 : rx1 - x0] = True
    occluded = int(mask.sum())
    stats = _plane_stats(canvas, model, mask if model.stats_region == "outside" else None, region)
    bounds = value_range(plane)
    work = _work_dtype(plane.dtype)
    out = plane.copy()
    window = out[y0:y1, x0:x1]
    if model.blur_sigma == 0 and model.feather_sigma == 0:
        levels = np.clip(_noise_levels(stats, work), bounds[0], bounds[1])
        picks = _level_indices(rng, occluded)
        if p == 1:  # replacement: clip and round the 65,536 levels, not the pixels
            window[mask] = finish(levels, plane.dtype, bounds).take(picks)
            return out, occluded
        original = window[mask].astype(work)
        window[mask] = finish(original + np.asarray(p, dtype=work) * (levels.take(picks) - original), plane.dtype, bounds)
        return out, occluded
    noise = _draw(rng, mask.shape, stats, work)
    if model.blur_sigma > 0:
        noise = gaussian_blur(noise, model.blur_sigma).astype(work, copy=False)
    np.clip(noise, bounds[0], bounds[1], out=noise)
    alpha = mask.astype(work)
    if model.feather_sigma > 0:
        alpha = gaussian_blur(alpha, model.feather_sigma).astype(work, copy=False)
    alpha *= p
    original = window.astype(work)
    out[y0:y1, x0:x1] = finish(original + alpha * (noise - original), plane.dtype, bounds)
    return out, occluded


def full_noise(
    image: ImageLike,
    rng: np.random.Generator | int,
    model: NoiseModel = NoiseModel(),
    p: float = 1.0,
) -> ImageLike:
    """The *Full Noise Image* of ShoViR §3.2 (the ΔFN condition): the image replaced by Gaussian
    noise whose mean and std match its pixels between the 1st and 99th percentiles.

    Same size, dtype and PIL mode as the input; ``p < 1`` blends instead of replacing.
    ``model.feather_sigma`` is ignored (the whole frame is replaced, nothing to feather).

    >>> image = np.full((64, 64), 100, np.uint8); image[:, 32:] = 140
    >>> noisy = full_noise(image, rng=0)
    >>> noisy.shape, noisy.dtype, abs(float(noisy.mean()) - 120) < 2, bool((noisy[:, 32:] < 120).any())
    ((64, 64), dtype('uint8'), True, True)
    """
    _check_p(p)
    generator = as_generator(rng)
    if p == 0:
        return unchanged(image)
    canvas = to_canvas(image)
    plane = canvas.plane
    stats = _plane_stats(canvas, model)
    bounds = value_range(plane)
    work = _work_dtype(plane.dtype)
    if p == 1 and model.blur_sigma == 0:
        levels = finish(np.clip(_noise_levels(stats, work), bounds[0], bounds[1]), plane.dtype, bounds)
        return canvas.restore(levels.take(_level_indices(generator, plane.shape)))
    noise = _draw(generator, plane.shape, stats, work)
    if model.blur_sigma > 0:
        noise = gaussian_blur(noise, model.blur_sigma).astype(work, copy=False)
    np.clip(noise, bounds[0], bounds[1], out=noise)
    if p < 1:
        original = plane.astype(work)
        noise = original + np.asarray(p, dtype=work) * (noise - original)
    return canvas.restore(finish(noise, plane.dtype, bounds))


def _check_p(p: float) -> None:
    if isinstance(p, bool) or not isinstance(p, (int, float, np.floating, np.integer)) or not 0.0 <= float(p) <= 1.0:
        raise ValueError(f"p (blending strength) must be a number in [0, 1], got {p!r}")
