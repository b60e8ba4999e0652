"""The example sweep configs and scripts, wherever shovir is installed.

The examples live in ``examples/`` (a source checkout) or ``share/shovir/examples`` (an installed
wheel, through ``[options.data_files]`` of ``setup.cfg``). :func:`copy_examples` puts them in a
folder of your choice, which is what ``shovir examples DIR`` does::

    >>> import tempfile
    >>> with tempfile.TemporaryDirectory() as tmp:
    ...     [path.name for path in copy_examples(tmp)] == list_examples()
    True
"""

from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path

__all__ = ["copy_examples", "examples_root", "list_examples"]


def _example_files(folder: Path) -> list[Path]:
    """The example files of ``folder``: plain files, not hidden ones or byte-code."""
    return sorted(p for p in folder.iterdir() if p.is_file() and not p.name.startswith(".") and p.suffix != ".pyc")


def examples_root() -> Path:
    """The folder holding the examples: ``$SHOVIR_EXAMPLES_DIR``, the source checkout's
    ``examples/``, or the wheel's ``share/shovir/examples``.

    >>> (examples_root() / "sweep.yaml").is_file()
    True
    """
    candidates: list[Path] = []
    if os.environ.get("SHOVIR_EXAMPLES_DIR"):
        candidates.append(Path(os.environ["SHOVIR_EXAMPLES_DIR"]))
    checkout = Path(__file__).resolve().parents[1]
    candidates.append(checkout / "examples")
    candidates.append(Path(sys.prefix) / "share" / "shovir" / "examples")
    for candidate in candidates:
        # Installed from a wheel, parents[1] is site-packages, where an ``examples/`` folder may
        # belong to another distribution: only the one next to shovir's own setup.cfg counts.
        if candidate == checkout / "examples" and not (checkout / "setup.cfg").is_file():
            continue
        if candidate.is_dir() and _example_files(candidate):
            return candidate
    raise FileNotFoundError(
        "cannot find the shovir examples; looked in " + ", ".join(str(c) for c in candidates)
        + " (set SHOVIR_EXAMPLES_DIR to the examples/ folder of a shovir checkout)"
    )


def list_examples(root: Path | None = None) -> list[str]:
    """File names of the examples shipped with shovir, sorted.

    >>> {"sweep.yaml", "mimic_medgemma.yaml", "evaluate_modules.py"} <= set(list_examples())
    True
    """
    return [p.name for p in _example_files(root or examples_root())]


def copy_examples(dest: str | os.PathLike[str], overwrite: bool = False) -> list[Path]:
    """Copy every example into ``dest`` (created if needed); return the paths written, sorted.

    An existing file is replaced only with ``overwrite=True``; otherwise nothing is copied and a
    :class:`FileExistsError` names the first file in the way. Files get the default permissions
    of new files, not those of the installed copies (which may be read-only).

    >>> import tempfile
    >>> with tempfile.TemporaryDirectory() as tmp:
    ...     _ = copy_examples(tmp)
    ...     copy_examples(tmp)
    Traceback (most recent call last):
    ...
    FileExistsError: .../evaluate_modules.py already exists; pass overwrite=True (shovir examples --force) to replace it
    """
    root = examples_root()
    sources = _example_files(root)
    dest = Path(dest)
    targets = [dest / source.name for source in sources]
    if not overwrite:
        # refuse before copying anything, so a refused call leaves dest as it was
        for target in targets:
            if target.exists():
                raise FileExistsError(f"{target} already exists; pass overwrite=True (shovir examples --force) to replace it")
    dest.mkdir(parents=True, exist_ok=True)
    for source, target in zip(sources, targets):
        shutil.copyfile(source, target)
    return targets
