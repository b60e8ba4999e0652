"""The calibration claims of the demo: what each reference model must show, with thresholds.

``shovir demo`` and the tests read the same :data:`THRESHOLDS`, so a verdict printed to users and
the assertion in CI can never drift apart.

=================== ======================================== =========================================
model               built to                                 the metrics must show
=================== ======================================== =========================================
reference-grounded  read each finding from its own box       FR_OCO ≥ 0.7 and FR_DOCO ≤ 0.15 at p = 1
reference-prior     ignore the image                         |ΔFN| ≤ 0.02, flip rates ≤ 0.02
reference-context   infer some findings from co-findings     FR_DOCO ≥ 0.4 on those classes at p = 1
=================== ======================================== =========================================
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any, Mapping

from shovir.results import Results

__all__ = ["THRESHOLDS", "CONTEXT_DERIVED_WITH_BOXES", "CalibrationCheck", "calibration_checks"]

THRESHOLDS: Mapping[str, float] = {
    "grounded_fr_oco_min": 0.7,
    "grounded_fr_doco_max": 0.15,
    "prior_delta_fn_max": 0.02,
    "prior_flip_rate_max": 0.02,
    "context_fr_doco_min": 0.4,
}
"""The demo's pass thresholds (see the module table)."""

CONTEXT_DERIVED_WITH_BOXES = ("Edema", "Atelectasis")
"""The context-derived classes of the phantom that have boxes (Pneumonia is report-only)."""

_PROTOCOL = "shovir"


@dataclass
class CalibrationCheck:
    """One claim about one reference model and whether the measured value passes it."""

    model: str
    claim: str
    value: float | None
    passed: bool

    def line(self) -> str:
        shown = "n/a" if self.value is None else f"{self.value:.3f}"
        return f"[{'PASS' if self.passed else 'FAIL'}] {self.model}: {self.claim} (measured {shown})"

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def _pooled(entry: Mapping[str, Any] | None, classes: tuple[str, ...]) -> float | None:
    """Pool a flip-rate result's per-class rates over ``classes`` (weighted by their denominators)."""
    if not entry:
        return None
    flips = denominator = 0.0
    for name in classes:
        rate, count = entry["per_class"].get(name), entry["denominators"].get(name, 0)
        if rate is not None and count:
            flips += rate * count
            denominator += count
    return flips / denominator if denominator else None


def calibration_checks(results: Results | Mapping[str, Any], thresholds: Mapping[str, float] = THRESHOLDS) -> list[CalibrationCheck]:
    """The known-answer checks of the demo (see the module docstring)."""
    results = results if isinstance(results, Results) else Results(results)
    t = thresholds
    checks = []
    fr_oco = results.value("reference-grounded", _PROTOCOL, "flip_rate", "oco", 1.0, "flip_rate")
    fr_doco = results.value("reference-grounded", _PROTOCOL, "flip_rate", "doco", 1.0, "flip_rate")
    checks.append(CalibrationCheck("reference-grounded", f"FR_OCO >= {t['grounded_fr_oco_min']} at p = 1", fr_oco,
                                   fr_oco is not None and fr_oco >= t["grounded_fr_oco_min"]))
    checks.append(CalibrationCheck("reference-grounded", f"FR_DOCO <= {t['grounded_fr_doco_max']} at p = 1", fr_doco,
                                   fr_doco is not None and fr_doco <= t["grounded_fr_doco_max"]))
    for key in ("f1_14_micro", "f1_5_micro"):
        delta = results.value("reference-prior", _PROTOCOL, "delta_fn", "full_noise", None, key)
        checks.append(CalibrationCheck("reference-prior", f"|ΔFN| ({key}) <= {t['prior_delta_fn_max']}", delta,
                                       delta is not None and abs(delta) <= t["prior_delta_fn_max"]))
    rates = [results.value("reference-prior", _PROTOCOL, "flip_rate", family, 1.0, "flip_rate") for family in ("oco", "doco")]
    worst = max((r for r in rates if r is not None), default=0.0)
    checks.append(CalibrationCheck("reference-prior", f"flip rates <= {t['prior_flip_rate_max']} at p = 1", worst,
                                   worst <= t["prior_flip_rate_max"]))
    context = _pooled(results.result("reference-context", _PROTOCOL, "flip_rate", "doco", 1.0), CONTEXT_DERIVED_WITH_BOXES)
    checks.append(CalibrationCheck("reference-context",
                                   f"FR_DOCO >= {t['context_fr_doco_min']} on {' + '.join(CONTEXT_DERIVED_WITH_BOXES)} at p = 1",
                                   context, context is not None and context >= t["context_fr_doco_min"]))
    return checks
