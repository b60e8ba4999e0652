"""``shovir demo``: the whole product on the built-in synthetic data, with a known answer.

Builds the synthetic set (200 phantoms, one row per (image, class)), runs the three reference
models through every ShoViR condition (baseline, full noise, RO/OCO/DOCO at p ∈ {0, .2, …, 1}),
scores the reports with the rule-based labeler, writes results.json, Table 1, the figures and
report.md, and ends with a calibration verdict: the metrics must recover what each reference
model is known to do.

=================== ======================================== =========================================
model               built to                                 the metrics must show
=================== ======================================== =========================================
reference-grounded  read each finding from its own box       FR_OCO ≥ 0.7 and FR_DOCO ≤ 0.15 at p = 1
reference-prior     ignore the image                         |ΔFN| ≤ 0.02, flip rates ≤ 0.02
reference-context   infer some findings from co-findings     FR_DOCO ≥ 0.4 on those classes at p = 1
=================== ======================================== =========================================
"""

from __future__ import annotations

import importlib.util
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

__all__ = ["CalibrationCheck", "calibration_checks", "run_demo", "DEMO_MODELS"]

DEMO_MODELS = ("reference-grounded", "reference-prior", "reference-context")
CONTEXT_DERIVED_WITH_BOXES = ("Edema", "Atelectasis")
"""The context-derived classes of the phantom that have boxes (Pneumonia is report-only)."""


@dataclass
class CalibrationCheck:
    model: str
    claim: str
    value: float | None
    passed: bool

    def line(self) -> str:
        shown = "n/a" if self.value is None else f"{self.value:.3f}"
        return f"[{'PASS' if self.passed else 'FAIL'}] {self.model}: {self.claim} (measured {shown})"


def _at(results: dict[str, Any], model: str, *path: str) -> Any:
    data: Any = results["models"].get(model, {})
    for key in path:
        if not isinstance(data, dict) or key not in data:
            return None
        data = data[key]
    return data


def _pooled(entry: dict[str, Any] | None, classes: tuple[str, ...]) -> float | None:
    """Pool a flip-rate entry's per-class rates over ``classes`` (weighted by their denominators)."""
    if not entry:
        return None
    flips = denominator = 0.0
    for name in classes:
        rate, count = entry["per_class"].get(name), entry["denominators"].get(name, 0)
        if rate is not None and count:
            flips += rate * count
            denominator += count
    return flips / denominator if denominator else None


def calibration_checks(results: dict[str, Any]) -> list[CalibrationCheck]:
    """The known-answer checks of the demo (see the module docstring)."""
    checks = []
    fr_oco = _at(results, "reference-grounded", "disease_level", "flip_rate", "oco", "p100", "value")
    fr_doco = _at(results, "reference-grounded", "disease_level", "flip_rate", "doco", "p100", "value")
    checks.append(CalibrationCheck("reference-grounded", "FR_OCO >= 0.7 at p = 1", fr_oco, fr_oco is not None and fr_oco >= 0.7))
    checks.append(CalibrationCheck("reference-grounded", "FR_DOCO <= 0.15 at p = 1", fr_doco, fr_doco is not None and fr_doco <= 0.15))
    for key in ("f1_14_micro", "f1_5_micro"):
        delta = _at(results, "reference-prior", "image_level", "delta_fn", key)
        checks.append(CalibrationCheck("reference-prior", f"|ΔFN| ({key}) <= 0.02", delta, delta is not None and abs(delta) <= 0.02))
    rates = [_at(results, "reference-prior", "disease_level", "flip_rate", family, "p100", "value") for family in ("oco", "doco")]
    worst = max((r for r in rates if r is not None), default=0.0)
    checks.append(CalibrationCheck("reference-prior", "flip rates <= 0.02 at p = 1", worst, worst <= 0.02))
    context = _pooled(_at(results, "reference-context", "disease_level", "flip_rate", "doco", "p100"), CONTEXT_DERIVED_WITH_BOXES)
    checks.append(CalibrationCheck("reference-context", f"FR_DOCO >= 0.4 on {' + '.join(CONTEXT_DERIVED_WITH_BOXES)} at p = 1",
                                   context, context is not None and context >= 0.4))
    return checks


def run_demo(out: str | Path = "demo", n_images: int = 200, seed: int = 0, cache_dir: str | None = None,
             workers: int = 2, n_resamples: int = 1000, progress: bool = True) -> tuple[Path, list[CalibrationCheck]]:
    """Run the demo into ``out``; return the report path and the calibration checks."""
    from shovir.report import write_report
    from shovir.runner.config import SweepConfig
    from shovir.runner.run import run_sweep
    from shovir.runner.score import score_run

    started = time.perf_counter()
    out = Path(out)
    config = SweepConfig.from_dict({
        "dataset": {"name": "synthetic", "rows": "pairs", "n_images": n_images, "seed": seed},
        "models": list(DEMO_MODELS),
        "conditions": "shovir",
        "seed": 3,
        "batch_size": 32,
    })
    if importlib.util.find_spec("torch") is None:
        workers = 0  # background workers use torch's DataLoader
    run_sweep(config, out / "run", cache_dir=cache_dir, progress=progress, workers=workers)
    results = score_run(out / "run", n_resamples=n_resamples)
    checks = calibration_checks(results)
    verdict = "\n".join(["## Calibration verdict", ""] + [f"- {check.line()}" for check in checks])
    results["calibration"] = [check.__dict__ for check in checks]
    report = write_report(results, out, title="shovir demo — reference models on synthetic chest X-rays", extra=verdict)
    elapsed = time.perf_counter() - started
    print(verdict.replace("## ", ""))
    print(f"wrote {report}, results.json, table1.*, figures in {out} ({elapsed:.0f} s)")
    return report, checks
