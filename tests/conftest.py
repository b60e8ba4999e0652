"""Shared test helpers: the wheel of the checkout, built once per session where asked."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

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
