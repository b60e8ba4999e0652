"""Model inputs prepared per second: the runner's input pipeline against per-call decoding.

A full ShoViR condition set (baseline, full noise, OCO, DOCO and RO at p = 0.2 … 1.0) on
MIMIC-CXR-sized JPEGs (2544×3056, 8-bit) with 3 disease boxes per image, one (image, class) pair
per box. Both paths run the same perturbation code, in one process, on the same calls:

* **per call**: every call decodes its image from the dataset and perturbs it alone (what the
  runner did when batches held one condition over several images);
* **pipeline**: :class:`shovir.runner.inputs.InputPipeline` over the plan, image by image — one
  decode and one pixel histogram per chunk of calls, shared by every condition and strength.

Usage: ``python benchmarks/input_pipeline.py [--images 2] [--repeats 3]``. Prints inputs/s for
each path and their ratio; absolute rates depend on the machine, the ratio is the figure to
compare (target ≥ 3×).
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path
from typing import Callable

import datasets
import numpy as np
from PIL import Image

from shovir.conditions import expand_conditions
from shovir.perturb import AUTHORS_PADCHEST_BOX_SIZES, Condition
from shovir.protocols import presets
from shovir.runner.inputs import InputPipeline
from shovir.runner.plan import build_plan

WIDTH, HEIGHT = 2544, 3056
BOXES = [(300, 500, 1100, 1400), (1400, 900, 2200, 1900), (700, 2000, 1500, 2700)]  # x0, y0, x1, y1
CLASSES = ["Cardiomegaly", "Pleural Effusion", "Lung Opacity"]


def _radiograph(seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    ramp = np.linspace(40, 200, WIDTH)[None, :] * np.linspace(0.6, 1.0, HEIGHT)[:, None]
    return np.clip(ramp + rng.normal(0, 12, (HEIGHT, WIDTH)), 0, 255).astype(np.uint8)


def _dataset(folder: Path, n_images: int) -> datasets.Dataset:
    boxes = [{"x_min": a, "y_min": b, "x_max": c, "y_max": d} for a, b, c, d in BOXES]
    rows: dict[str, list] = {name: [] for name in ("image", "image_id", "sample_id", "target_class", "disease_boxes",
                                                   "context_boxes", "boxes")}
    for index in range(n_images):
        path = folder / f"study-{index}.jpg"
        Image.fromarray(_radiograph(index), "L").save(path, quality=95)
        for target, box in zip(CLASSES, boxes):
            rows["image"].append(str(path))
            rows["image_id"].append(f"study-{index}")
            rows["sample_id"].append(f"study-{index}::{target}")
            rows["target_class"].append(target)
            rows["disease_boxes"].append([box])
            rows["context_boxes"].append([other for other in boxes if other is not box])
            rows["boxes"].append(boxes)
    return datasets.Dataset.from_dict(rows).cast_column("image", datasets.Image())


def _median_rate(function: Callable[[], int], repeats: int) -> float:
    rates = []
    for _ in range(repeats):
        start = time.perf_counter()
        made = function()
        rates.append(made / (time.perf_counter() - start))
    return statistics.median(rates)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--images", type=int, default=2, help="JPEG studies (3 pairs each)")
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()

    with tempfile.TemporaryDirectory() as folder:
        dataset = _dataset(Path(folder), args.images)
        rows = dataset.remove_columns(["image"])[:]
        images = dataset.select_columns(["image"])
        specs = expand_conditions("shovir", presets())
        plan = build_plan(rows, specs, seed=3)
        conditions = {(s.image_condition, s.image_p): Condition(s.image_condition, s.image_p, seed=3,
                                                                box_sizes=AUTHORS_PADCHEST_BOX_SIZES) for s in specs}
        seeds = {call.key: index for index, call in enumerate(plan.calls)}

        def per_call() -> int:
            for call in plan.calls:
                source = {name: values[call.source_row] for name, values in rows.items()}
                conditions[(call.image_condition, call.p)].apply(images[call.source_row]["image"], source)
            return len(plan.calls)

        def pipeline() -> int:
            made = 0
            for batch, _ in InputPipeline(plan.calls, seeds, images, rows, conditions, "Findings:").batches(8):
                made += len(batch)
            return made

        print(f"{args.images} JPEG studies {WIDTH}x{HEIGHT}, {len(BOXES)} boxes each: {len(plan.calls)} model inputs "
              f"for {len(plan.requests)} (sample, condition) requests; median of {args.repeats} runs")
        baseline = _median_rate(per_call, args.repeats)
        ours = _median_rate(pipeline, args.repeats)
        print(f"{'path':<12} {'inputs/s':>9}")
        print(f"{'per call':<12} {baseline:>9.1f}")
        print(f"{'pipeline':<12} {ours:>9.1f}")
        print(f"speed-up: {ours / baseline:.1f}x")


if __name__ == "__main__":
    main()
