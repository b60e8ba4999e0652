"""The runner's own cost: the non-model share of a sweep's time, with a tiny model, batch 16.

A sweep spends its time in the model and in everything around it: reading and decoding images,
applying the intervention, building messages, writing and flushing records. With a tiny random
LLaVA (built offline, :func:`shovir.models.testing.build_tiny_llava`) the model is fast, so this
is a pessimistic measure of the overhead. The script runs the same sweep inline and with two
background workers, times the model's ``generate`` from inside the run, and prints

    non-model share = (loop time - time inside generate) / loop time          (target <= 10%)

where the loop time is the run's wall time minus its fixed cost (loading the dataset from its
cache, planning, merging), measured by resuming the finished run, which does everything but the
per-sample work.

Usage: ``python benchmarks/runner.py [--n-images 60] [--workers 2]``.
"""

from __future__ import annotations

import argparse
import shutil
import tempfile
import time
from pathlib import Path

from shovir.models import register_model
from shovir.models.hf import ImageTextToTextAdapter
from shovir.models.testing import build_tiny_llava
from shovir.runner.config import SweepConfig
from shovir.runner.run import run_sweep


class TimedTinyLlava(ImageTextToTextAdapter):
    """The generic adapter on a tiny random LLaVA, accumulating the time spent in ``generate``."""

    name = "timed-tiny-llava"
    seconds = 0.0

    def __init__(self, checkpoint: str) -> None:
        super().__init__(checkpoint, prompt="Findings:", max_new_tokens=24, device="cpu")

    def generate(self, messages):
        start = time.perf_counter()
        try:
            return super().generate(messages)
        finally:
            TimedTinyLlava.seconds += time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--n-images", type=int, default=60)
    parser.add_argument("--workers", type=int, default=2)
    args = parser.parse_args()

    scratch = Path(tempfile.mkdtemp(prefix="shovir-bench-"))
    try:
        build_tiny_llava(scratch / "tiny")
        register_model("timed-tiny-llava", f"{__name__}:TimedTinyLlava")
        config = SweepConfig.from_dict({
            "dataset": {"name": "synthetic", "rows": "pairs", "n_images": args.n_images},
            "models": [{"name": "timed-tiny-llava", "checkpoint": str(scratch / "tiny")}],
            "conditions": ["baseline", "full_noise", {"name": "oco", "p": [0.4, 1.0]}, {"name": "doco", "p": [1.0]}],
            "seed": 3,
            "batch_size": 16,
        })
        # build the dataset cache once, outside the timed runs
        run_sweep(config, scratch / "warm", cache_dir=str(scratch / "cache"), progress=False, quiet=True)
        print(f"{args.n_images} synthetic images, batch 16, tiny random LLaVA (24 new tokens), {len(config.conditions)} conditions")
        for workers in (0, args.workers):
            TimedTinyLlava.seconds = 0.0
            folder = scratch / f"run-{workers}"
            start = time.perf_counter()
            run_sweep(config, folder, cache_dir=str(scratch / "cache"), progress=False, workers=workers, quiet=True)
            wall = time.perf_counter() - start
            in_model = TimedTinyLlava.seconds
            start = time.perf_counter()
            run_sweep(config, folder, cache_dir=str(scratch / "cache"), progress=False, workers=workers, quiet=True)  # nothing left to do
            fixed = time.perf_counter() - start
            loop = wall - fixed
            share = (loop - in_model) / loop
            print(f"  workers={workers}: per-sample loop {loop:6.2f} s (fixed cost {fixed:.2f} s excluded), "
                  f"in generate {in_model:6.2f} s, non-model share {share:6.1%} (target <= 10%)")
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


if __name__ == "__main__":
    main()
