"""Speed of the interventions against the ShoViR authors' algorithm, measured in the same run.

The baseline is a straightforward implementation of the authors' ``preprocess.py`` (reference
code §4.2–4.7): the image as 3-channel RGB, full-frame 3-channel Gaussian noise, PIL Gaussian
blur of radius 2 on the whole noise frame, an alpha mask feathered with radius 6, float blending
of the whole frame; RO with per-box noise and global statistics. shovir draws noise only where it
is used, picks it from 2^16 precomputed Gaussian levels and takes the statistics from an exact
histogram. The "prepared" column passes the image through ``shovir.perturb.prepare`` first, as the
runner does for a whole condition set: the histogram is then counted once per image.

Usage: ``python benchmarks/perturb.py [--repeats 5] [--baseline-repeats 3]``. Prints ms/image per
condition and the speed-up ratio (baseline time / shovir time). Absolute times depend on the
machine; the ratios are the figures to compare.
"""

from __future__ import annotations

import argparse
import statistics
import time
from typing import Callable

import numpy as np
from PIL import Image, ImageFilter

from shovir.perturb import AUTHORS_PADCHEST_BOX_SIZES, NoiseModel, doco, full_noise, oco, prepare, ro, sample_rng

WIDTH, HEIGHT = 2544, 3056
BOXES = [(300, 500, 1100, 1400), (1400, 900, 2200, 1900), (700, 2000, 1500, 2700)]  # x0, y0, x1, y1
CONTEXT = [(1500, 2100, 2300, 2800)]


# -- the authors' algorithm, written plainly ---------------------------------------------------


def _authors_matched_fill(rgb: np.ndarray, mask: np.ndarray, rng: np.random.RandomState) -> np.ndarray:
    outside = rgb[~mask] if (~mask).sum() >= 32 else rgb.reshape(-1, 3)
    low = np.percentile(outside, 1, axis=0)
    high = np.percentile(outside, 99, axis=0)
    keep = np.all((outside >= low) & (outside <= high), axis=1)
    kept = outside[keep] if keep.sum() >= 32 else outside
    center = np.median(kept, axis=0)
    scale = np.maximum(kept.std(axis=0), 1.0)
    noise = rng.randn(*rgb.shape) * scale + center
    noise = np.clip(noise, 0, 255).astype(np.uint8)
    return np.asarray(Image.fromarray(noise, "RGB").filter(ImageFilter.GaussianBlur(radius=2.0)))


def _authors_blend(rgb: np.ndarray, fill: np.ndarray, mask: np.ndarray, p: float, feather: float) -> np.ndarray:
    alpha = (mask * p * 255).astype(np.uint8)
    if feather > 0:
        alpha = np.asarray(Image.fromarray(alpha, "L").filter(ImageFilter.GaussianBlur(radius=feather)))
    alpha = alpha.astype(np.float32)[..., None] / 255.0
    out = rgb.astype(np.float32) * (1 - alpha) + fill.astype(np.float32) * alpha
    return np.clip(out, 0, 255).astype(np.uint8)


def _union(boxes: list[tuple[int, int, int, int]], shape: tuple[int, int]) -> np.ndarray:
    mask = np.zeros(shape, dtype=bool)
    for x0, y0, x1, y1 in boxes:
        mask[y0:y1, x0:x1] = True
    return mask


def authors_oco(gray: np.ndarray, boxes: list, p: float, seed: int) -> np.ndarray:
    rgb = np.asarray(Image.fromarray(gray, "L").convert("RGB"))
    mask = _union(boxes, gray.shape)
    fill = _authors_matched_fill(rgb, mask, np.random.RandomState(seed))
    return _authors_blend(rgb, fill, mask, p, feather=6.0)


def authors_full_noise(gray: np.ndarray, seed: int) -> np.ndarray:
    rgb = np.asarray(Image.fromarray(gray, "L").convert("RGB"))
    mask = np.zeros(gray.shape, dtype=bool)
    fill = _authors_matched_fill(rgb, mask, np.random.RandomState(seed))
    return _authors_blend(rgb, fill, np.ones(gray.shape, dtype=bool), 1.0, feather=0.0)


def authors_ro(gray: np.ndarray, annotated: list, p: float, seed: int) -> np.ndarray:
    rng = np.random.RandomState(seed)
    rgb = np.asarray(Image.fromarray(gray, "L").convert("RGB")).copy()
    height, width = gray.shape
    n_target = rng.randint(1, max(len(annotated), 1) + 1)
    accepted = []
    for _ in range(n_target):
        for _ in range(100):
            w_frac = np.clip(rng.normal(0.226, 0.137), 0.026, 0.984)
            h_frac = np.clip(rng.normal(0.250, 0.169), 0.026, 0.984)
            bw, bh = min(max(1, int(width * w_frac)), width), min(max(1, int(height * h_frac)), height)
            x1, y1 = rng.randint(0, width - bw + 1), rng.randint(0, height - bh + 1)
            box = (x1, y1, x1 + bw, y1 + bh)
            if not any(box[0] < b[2] and box[2] > b[0] and box[1] < b[3] and box[3] > b[1] for b in annotated):
                accepted.append(box)
                break
    center = rgb.reshape(-1, 3).mean(axis=0)
    scale = np.maximum(rgb.reshape(-1, 3).std(axis=0), 1.0)
    for x0, y0, x1, y1 in accepted:
        noise = np.clip(rng.randn(y1 - y0, x1 - x0, 3) * scale + center, 0, 255)
        region = rgb[y0:y1, x0:x1].astype(np.float64)
        rgb[y0:y1, x0:x1] = np.clip(region * (1 - p) + noise * p, 0, 255).astype(np.uint8)
    return rgb


# -- timing ------------------------------------------------------------------------------------


def _median_ms(function: Callable[[int], object], repeats: int) -> float:
    function(0)  # warm-up: imports, allocator, page faults
    times = []
    for repeat in range(repeats):
        start = time.perf_counter()
        function(repeat + 1)
        times.append(time.perf_counter() - start)
    return 1000 * statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--baseline-repeats", type=int, default=3)
    args = parser.parse_args()

    rng = np.random.default_rng(0)
    ramp = np.linspace(40, 200, WIDTH)[None, :] * np.linspace(0.6, 1.0, HEIGHT)[:, None]
    gray = np.clip(ramp + rng.normal(0, 12, (HEIGHT, WIDTH)), 0, 255).astype(np.uint8)
    boxes = [{"x_min": a, "y_min": b, "x_max": c, "y_max": d} for a, b, c, d in BOXES]
    context = [{"x_min": a, "y_min": b, "x_max": c, "y_max": d} for a, b, c, d in CONTEXT]
    pil = Image.fromarray(gray, "L")
    prepared = prepare(gray)

    def key(condition: str, repeat: int) -> np.random.Generator:
        return sample_rng(3, f"bench-{repeat}", condition)

    rows = [
        ("OCO p=1", lambda r: authors_oco(gray, BOXES, 1.0, r), lambda r: oco(gray, boxes, 1.0, key("oco", r))),
        ("DOCO p=1", lambda r: authors_oco(gray, CONTEXT, 1.0, r), lambda r: doco(gray, context, 1.0, key("doco", r))),
        ("RO p=1", lambda r: authors_ro(gray, BOXES, 1.0, r),
         lambda r: ro(gray, boxes, 1.0, key("ro", r), AUTHORS_PADCHEST_BOX_SIZES)),
        ("full noise", lambda r: authors_full_noise(gray, r), lambda r: full_noise(gray, key("full_noise", r))),
    ]
    print(f"image {WIDTH}x{HEIGHT} uint8, {len(BOXES)} disease boxes; median of {args.repeats} runs "
          f"(baseline: {args.baseline_repeats})")
    print(f"{'condition':<12} {'authors ms':>11} {'shovir ms':>10} {'speed-up':>9}   {'prepared ms':>11} {'speed-up':>9}   "
          f"{'shovir, PIL in/out':>18} {'shovir, authors noise':>22}")
    for name, baseline, ours in rows:
        baseline_ms = _median_ms(baseline, args.baseline_repeats)
        ours_ms = _median_ms(ours, args.repeats)
        extra = ""
        if name.startswith("OCO"):
            prepared_ms = _median_ms(lambda r: oco(prepared, boxes, 1.0, key("oco", r)), args.repeats)
            pil_ms = _median_ms(lambda r: oco(pil, boxes, 1.0, key("oco", r)), args.repeats)
            authors_model_ms = _median_ms(lambda r: oco(gray, boxes, 1.0, key("oco", r), NoiseModel.authors()), args.repeats)
            extra = f"{pil_ms:>18.1f} {authors_model_ms:>22.1f}"
        elif name.startswith("DOCO"):
            prepared_ms = _median_ms(lambda r: doco(prepared, context, 1.0, key("doco", r)), args.repeats)
        elif name.startswith("RO"):
            prepared_ms = _median_ms(lambda r: ro(prepared, boxes, 1.0, key("ro", r), AUTHORS_PADCHEST_BOX_SIZES), args.repeats)
        else:
            prepared_ms = _median_ms(lambda r: full_noise(prepared, key("full_noise", r)), args.repeats)
            pil_ms = _median_ms(lambda r: full_noise(pil, key("full_noise", r)), args.repeats)
            authors_model_ms = _median_ms(lambda r: full_noise(gray, key("full_noise", r), NoiseModel.authors()), args.repeats)
            extra = f"{pil_ms:>18.1f} {authors_model_ms:>22.1f}"
        print(f"{name:<12} {baseline_ms:>11.1f} {ours_ms:>10.1f} {baseline_ms / ours_ms:>8.1f}x   "
              f"{prepared_ms:>11.1f} {baseline_ms / prepared_ms:>8.1f}x   {extra}", flush=True)


if __name__ == "__main__":
    main()
