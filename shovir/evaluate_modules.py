"""Load the evaluate modules shipped with shovir, and make ``evaluate.load("shovir/<name>")`` work offline.

The evaluate modules live in ``metrics/<name>/`` (a source checkout) or ``share/shovir/metrics``
(an installed wheel).

:func:`load_metric` is the safe way in: it hands ``evaluate.load`` the local path of the installed
module's script, and evaluate loads a local script without contacting the Hub (its
``evaluation_module_factory`` takes the ``LocalEvaluationModuleFactory`` branch for an existing
``.py`` file before any Hub lookup), online or offline.

``evaluate.load("shovir/flip_rate")`` is different: evaluate reads a ``namespace/name`` id as a Hub
Space first (``HubEvaluationModuleFactory``), so online the code that runs is whatever the owner
of the ``shovir`` namespace on the Hub published there; only when the Hub cannot supply it
(offline, or no such Space) does it fall back to its dynamic-modules cache
(``$HF_MODULES_CACHE/evaluate_modules/metrics/shovir--flip_rate/<64-char hash>/flip_rate.py``).
:func:`install_modules` writes each module there, under the SHA-256 of its code, exactly as a Hub
download would, so that call also works offline (``HF_EVALUATE_OFFLINE=1``).
"""

from __future__ import annotations

import difflib
import hashlib
import os
import shutil
import sys
from pathlib import Path
from typing import Any

__all__ = ["NAMESPACE", "modules_root", "module_names", "module_script", "load_metric", "install_modules"]

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


def module_script(name: str, root: Path | None = None) -> Path:
    """The local script ``<root>/<name>/<name>.py`` of a shipped module.

    ``name`` is a module name (``"flip_rate"``) or its Hub-style id (``"shovir/flip_rate"``); an
    unknown name is a ``ValueError`` that lists the available modules and the closest match.

    >>> module_script("shovir/flip_rate").name
    'flip_rate.py'
    >>> module_script("flip_rates")
    Traceback (most recent call last):
    ...
    ValueError: unknown shovir metric 'flip_rates' (did you mean 'flip_rate'?); available: ...
    """
    if not isinstance(name, str) or not name:
        raise ValueError(f"name must be a non-empty string naming a shovir metric, got {name!r}; "
                         f"available: {', '.join(module_names(root))}")
    bare = name[len(NAMESPACE) + 1:] if name.startswith(NAMESPACE + "/") else name
    root = root or modules_root()
    available = module_names(root)
    if bare not in available:
        close = difflib.get_close_matches(bare, available, n=1, cutoff=0.5)
        hint = f" (did you mean {close[0]!r}?)" if close else ""
        raise ValueError(f"unknown shovir metric {name!r}{hint}; available: {', '.join(available)} "
                         f"(modules found in {root})")
    return root / bare / f"{bare}.py"


# evaluate.load arguments that only mean something for a Hub module: refused rather than ignored
_HUB_ONLY_ARGUMENTS = ("revision", "download_config", "download_mode")


def load_metric(name: str, **kwargs: Any) -> Any:
    """Load the evaluate module ``name`` shipped with the installed shovir: never from the Hub.

    ``name`` is ``"flip_rate"`` or ``"shovir/flip_rate"``. The module is read from the local copy
    that came with this installation (:func:`modules_root`: the checkout's ``metrics/`` or the
    wheel's ``share/shovir/metrics``) and handed to ``evaluate.load`` as a file path, which evaluate
    loads without any Hub request, online or offline. Prefer it to ``evaluate.load("shovir/<name>")``,
    which online runs whatever the Hub Space ``shovir/<name>`` holds. Other keyword arguments
    (``config_name``, ``experiment_id``, ``cache_dir``, ``keep_in_memory``, ``process_id``,
    ``num_process``, ...) go to ``evaluate.load``; ``revision``, ``download_config`` and
    ``download_mode`` only apply to Hub modules and are refused.

    >>> flip_rate = load_metric("flip_rate")
    >>> cardiomegaly = [0, 1] + [0] * 12
    >>> flip_rate.compute(references=[cardiomegaly] * 2, control_predictions=[cardiomegaly] * 2,
    ...                   predictions=[[0, 2] + [0] * 12, cardiomegaly])["flip_rate"]
    0.5
    """
    script = module_script(name)
    refused = sorted(set(kwargs) & set(_HUB_ONLY_ARGUMENTS))
    if refused:
        raise ValueError(f"{', '.join(refused)}: only used for Hub modules, and load_metric never loads from the Hub; "
                         f"drop the argument (the module is the one installed with shovir {_version()}), or call "
                         f"evaluate.load yourself if you mean to run a Hub Space's code")
    import evaluate
    from evaluate.loading import get_imports

    # a ``# From: URL`` import comment would make evaluate fetch a file even for a local script
    external = [import_path for kind, _, import_path, _ in get_imports(str(script)) if kind == "external"]
    if external:
        raise ValueError(f"the module {script} imports remote files {external}; a shipped shovir module must not "
                         f"(reinstall shovir, or unset SHOVIR_METRICS_DIR if it points at a modified copy)")
    return evaluate.load(str(script), **kwargs)


def _version() -> str:
    from shovir import __version__

    return __version__


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
