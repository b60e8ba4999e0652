"""Make ``evaluate.load("shovir/<name>")`` work offline.

The evaluate modules live in ``metrics/<name>/`` (a source checkout) or ``share/shovir/metrics``
(an installed wheel). ``evaluate`` resolves ``"shovir/flip_rate"`` through the Hub and, when the
Hub cannot be reached, falls back to its dynamic-modules cache
(``$HF_MODULES_CACHE/evaluate_modules/metrics/shovir--flip_rate/<64-char hash>/flip_rate.py``).
:func:`install_modules` writes each module there, under the SHA-256 of its code, exactly as a Hub
download would, so the same call works with and without a network.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import sys
from pathlib import Path

__all__ = ["NAMESPACE", "modules_root", "module_names", "install_modules"]

NAMESPACE = "shovir"


def modules_root() -> Path:
    """The folder holding ``<name>/<name>.py`` modules: ``$SHOVIR_METRICS_DIR``, the source
    checkout's ``metrics/``, or the wheel's ``share/shovir/metrics``."""
    candidates = []
    if os.environ.get("SHOVIR_METRICS_DIR"):
        candidates.append(Path(os.environ["SHOVIR_METRICS_DIR"]))
    candidates.append(Path(__file__).resolve().parents[1] / "metrics")
    candidates.append(Path(sys.prefix) / "share" / "shovir" / "metrics")
    for candidate in candidates:
        if candidate.is_dir() and any((candidate / p.name / f"{p.name}.py").is_file() for p in candidate.iterdir() if p.is_dir()):
            return candidate
    raise FileNotFoundError(
        "cannot find the shovir evaluate modules; looked in " + ", ".join(str(c) for c in candidates)
        + " (set SHOVIR_METRICS_DIR to the metrics/ folder of a shovir checkout)"
    )


def module_names(root: Path | None = None) -> list[str]:
    """Names of the evaluate modules shipped with shovir.

    >>> "flip_rate" in module_names()
    True
    """
    root = root or modules_root()
    return sorted(p.name for p in root.iterdir() if p.is_dir() and (p / f"{p.name}.py").is_file())


def install_modules(names: list[str] | None = None, modules_cache: str | os.PathLike | None = None) -> list[Path]:
    """Copy modules into evaluate's dynamic-modules cache; return the installed script paths.

    ``modules_cache`` defaults to evaluate's ``HF_MODULES_CACHE`` (``$HF_HOME/modules``). Older
    copies of the same module are replaced, so the cache always holds the installed version.
    """
    import evaluate.config

    root = modules_root()
    available = module_names(root)
    names = names or available
    unknown = sorted(set(names) - set(available))
    if unknown:
        raise ValueError(f"unknown evaluate module(s) {unknown}; available: {', '.join(available)}")
    cache = Path(modules_cache or evaluate.config.HF_MODULES_CACHE) / "evaluate_modules" / "metrics"
    installed = []
    for name in names:
        script = root / name / f"{name}.py"
        code = script.read_bytes()
        target_dir = cache / f"{NAMESPACE}--{name}"
        if target_dir.is_dir():
            shutil.rmtree(target_dir)
        version_dir = target_dir / hashlib.sha256(code).hexdigest()
        version_dir.mkdir(parents=True)
        (version_dir / f"{name}.py").write_bytes(code)
        installed.append(version_dir / f"{name}.py")
    return installed
