"""Shared test helpers: the wheel of the checkout, and the toy model the subprocess sweeps import."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]

# Never part of a wheel, and large (.venv), stale (build/) or run outputs if copied.
_TOP_LEVEL_SKIPPED = {".git", ".venv", "venv", "build", "dist", ".pytest_cache", ".ruff_cache", "out", "preview", "demo",
                      "runs"}


def _not_sources(folder: str, names: list[str]) -> set[str]:
    """``shutil.copytree`` ignore function: byte-code and build metadata anywhere, tool and output
    folders only at the top (a package may well hold a ``demo`` module or folder)."""
    skipped = {n for n in names if n == "__pycache__" or n.endswith((".pyc", ".egg-info"))}
    if Path(folder).resolve() == REPO:
        skipped |= _TOP_LEVEL_SKIPPED & set(names)
    return skipped


def build_wheel(root: Path) -> tuple[Path, Path]:
    """Snapshot the checkout under ``root/src`` and build its wheel into ``root/dist``; returns
    ``(snapshot, wheel)``. pip builds in-tree, and in the checkout ``build/lib`` would keep modules
    deleted since an earlier build and ship them; a snapshot avoids that."""
    source = root / "src"
    shutil.copytree(REPO, source, ignore=_not_sources)
    dist = root / "dist"
    result = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation",
                             "--disable-pip-version-check", "-q", "-w", str(dist), str(source)],
                            capture_output=True, text=True, timeout=900)
    assert result.returncode == 0, f"pip wheel failed:\n{result.stdout}\n{result.stderr}"
    wheels = sorted(dist.glob("shovir-*.whl"))
    assert len(wheels) == 1, f"expected one shovir wheel in {dist}, got {[w.name for w in wheels]}"
    return source, wheels[0]


# A model whose report depends on the image's pixels only; sweeps run in subprocesses import it as
# ``toy_model`` (written next to their script), so it is source text rather than a class.
TOY_MODEL = '''
import os, time
import numpy as np
from shovir.models import Generation, ModelAdapter, register_model

class Toy(ModelAdapter):
    """Reports cardiomegaly when the centre of the image is bright: depends on the pixels only."""
    name = "toy"

    def __init__(self, delay: float = 0.0, checkpoint: str = ""):
        self.delay = float(delay)
        self.checkpoint = checkpoint

    def config(self):
        return {"name": self.name, "checkpoint": self.checkpoint}

    def generate(self, messages):
        time.sleep(self.delay)
        out = []
        for message in messages:
            plane = np.asarray(message.images[0].convert("L"), dtype=float)
            h, w = plane.shape
            centre = plane[h // 3: 2 * h // 3, w // 3: 2 * w // 3].mean()
            text = "The heart is enlarged." if centre > 150 else "No acute cardiopulmonary process."
            out.append(Generation(f"{text} ({centre:.1f}){self.checkpoint}"))
        return out

register_model("toy", "toy_model:Toy")
'''


@pytest.fixture(scope="session")
def demo_run(tmp_path_factory):
    """``shovir demo`` once per test session (every protocol, the default 200 images):
    ``(out folder, report path, calibration checks)``. Tests read its outputs, never modify them."""
    from shovir.calibration.demo import run_demo

    out = tmp_path_factory.mktemp("demo")
    report, checks = run_demo(out, cache_dir=str(out / "cache"), progress=False, quiet=True)
    return out, report, checks
