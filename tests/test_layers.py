"""The package's layers: no module imports from a layer above its own (function-level imports count).

The order follows the data flow of DESIGN.md: vocabulary and declarations at the bottom; images,
metrics, labelers, models and datasets above them; the runner (generation only); the scorer; the
results readers (report); the calibration package that uses everything; the command line on top.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "shovir"

LAYERS: dict[str, int] = {
    "labels": 0, "conditions": 0, "boxes": 0, "registry": 0, "protocols": 0, "results": 0,
    "perturb": 1, "metrics": 1, "labelers": 1, "models": 1, "evaluate_modules": 1, "examples": 1, "spaces": 1,
    "data": 2, "icare": 2,
    "runner": 3,
    "scoring": 4,
    "report": 5,
    "calibration": 6, "leaderboard": 6,
    "cli": 7,
}
"""Top-level module or subpackage of ``shovir`` → its layer (lower may not import higher)."""


def _part(module: str) -> str | None:
    parts = module.split(".")
    return parts[1] if parts[0] == "shovir" and len(parts) > 1 else None


def _imports(path: Path) -> list[tuple[int, str]]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names = [node.module] if node.module != "shovir" else [f"shovir.{a.name}" for a in node.names]
            found += [(node.lineno, name) for name in names]
        elif isinstance(node, ast.Import):
            found += [(node.lineno, alias.name) for alias in node.names]
    return found


def _modules() -> list[Path]:
    return sorted(p for p in PACKAGE.rglob("*.py") if "__pycache__" not in p.parts)


def test_every_part_of_the_package_has_a_layer():
    parts = {p.relative_to(PACKAGE).parts[0].removesuffix(".py") for p in _modules()} - {"__init__"}
    assert parts <= set(LAYERS), f"give these a layer in tests/test_layers.py: {sorted(parts - set(LAYERS))}"


@pytest.mark.parametrize("path", _modules(), ids=lambda p: str(p.relative_to(PACKAGE)))
def test_no_import_from_a_higher_layer(path):
    own = path.relative_to(PACKAGE).parts[0].removesuffix(".py")
    if own == "__init__":
        return
    upward = [f"line {line}: {module}" for line, module in _imports(path)
              if (part := _part(module)) in LAYERS and LAYERS[part] > LAYERS[own]]
    assert not upward, f"{own} (layer {LAYERS[own]}) imports from a higher layer: {upward}"


def test_the_check_sees_a_violation(tmp_path):
    bad = tmp_path / "bad.py"
    bad.write_text("def f():\n    from shovir.report import write_report\n")
    assert _imports(bad) == [(2, "shovir.report")] and LAYERS[_part("shovir.report")] > LAYERS["runner"]
