"""The calibration claims of the demo: what each reference model must show, per protocol.

``shovir demo`` and the tests read the same :data:`THRESHOLDS` and :data:`CLAIMS`, so a verdict
printed to users and the assertion in CI can never drift apart.

========================= ======================================== ===========================================
model                     built to                                 the metrics must show
========================= ======================================== ===========================================
ShoViR
reference-grounded        read each finding from its own box       FR_OCO ≥ 0.7 and FR_DOCO ≤ 0.15 at p = 1
reference-prior           ignore the image                         |ΔFN| ≤ 0.02, flip rates ≤ 0.02
reference-context         infer some findings from co-findings     FR_DOCO ≥ 0.4 on those classes at p = 1
Beyond Accuracy
reference-vqa-grounded    answer from the image region             VRS ≥ 0.3; blank accuracy within 0.05 of
                                                                   the "nothing seen" answer prior
reference-vqa-prior       answer from the question alone           |VRS| ≤ 0.05, image sensitivity ≤ 0.05
ModaLens
reference-vqa-report      trust the report when given, else the    swap flip rate with the report ≤ 0.05,
                          image                                    without it ≥ 0.2; paired difference's 95%
                                                                   interval above 0
========================= ======================================== ===========================================
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any, Callable, Mapping

from shovir.results import Results

__all__ = ["THRESHOLDS", "CONTEXT_DERIVED_WITH_BOXES", "Claim", "CLAIMS", "CalibrationCheck", "calibration_checks"]

THRESHOLDS: Mapping[str, float] = {
    "grounded_fr_oco_min": 0.7,
    "grounded_fr_doco_max": 0.15,
    "prior_delta_fn_max": 0.02,
    "prior_flip_rate_max": 0.02,
    "context_fr_doco_min": 0.4,
    "vqa_grounded_vrs_min": 0.3,
    "vqa_grounded_blank_tolerance": 0.05,
    "vqa_prior_vrs_max": 0.05,
    "vqa_prior_image_sensitivity_max": 0.05,
    "vqa_report_flip_with_report_max": 0.05,
    "vqa_report_flip_without_report_min": 0.2,
}
"""The demo's pass thresholds (see the module table)."""

CONTEXT_DERIVED_WITH_BOXES = ("Edema", "Atelectasis")
"""The context-derived classes of the phantom that have boxes (Pneumonia is report-only)."""


@dataclass
class CalibrationCheck:
    """One claim about one reference model and whether the measured value passes it."""

    model: str
    claim: str
    value: float | None
    passed: bool
    protocol: str = "shovir"

    def line(self) -> str:
        shown = "n/a" if self.value is None else f"{self.value:.3f}"
        return f"[{'PASS' if self.passed else 'FAIL'}] {self.model}: {self.claim} (measured {shown})"

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class Claim:
    """A known answer: ``measure`` reads a value from the results, ``passes`` judges it.

    ``measure`` receives the results, the thresholds and the demo's context (e.g. the answer prior
    of the VQA set); a claim whose model is absent from the results is not checked.
    """

    protocol: str
    model: str
    text: str
    measure: Callable[[Results, Mapping[str, Any]], float | None]
    passes: Callable[[float, Mapping[str, float]], bool]


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


def _worst_prior_flip(results: Results, context: Mapping[str, Any]) -> float:
    rates = [results.value("reference-prior", "shovir", "flip_rate", family, 1.0, "flip_rate") for family in ("oco", "doco")]
    return max((r for r in rates if r is not None), default=0.0)


def _reliance(field: str, model: str) -> Callable[[Results, Mapping[str, Any]], float | None]:
    return lambda results, context: results.value(model, "beyond_accuracy", "visual_reliance", "baseline", None, field)


def _swap(field: str) -> Callable[[Results, Mapping[str, Any]], float | None]:
    return lambda results, context: results.value("reference-vqa-report", "modalens", "swap_sensitivity", "swap", None, field)


def _blank_gap(results: Results, context: Mapping[str, Any]) -> float | None:
    blank = results.value("reference-vqa-grounded", "beyond_accuracy", "visual_reliance", "baseline", None, "accuracy_blank")
    prior = context.get("nothing_seen_accuracy")
    return None if blank is None or prior is None else abs(blank - prior)


def _difference_low(results: Results, context: Mapping[str, Any]) -> float | None:
    interval = results.interval("reference-vqa-report", "modalens", "swap_sensitivity", "swap", "paired_difference")
    return None if interval is None else interval[0]


T = THRESHOLDS
CLAIMS: tuple[Claim, ...] = (
    Claim("shovir", "reference-grounded", f"FR_OCO >= {T['grounded_fr_oco_min']} at p = 1",
          lambda r, c: r.value("reference-grounded", "shovir", "flip_rate", "oco", 1.0, "flip_rate"),
          lambda v, t: v >= t["grounded_fr_oco_min"]),
    Claim("shovir", "reference-grounded", f"FR_DOCO <= {T['grounded_fr_doco_max']} at p = 1",
          lambda r, c: r.value("reference-grounded", "shovir", "flip_rate", "doco", 1.0, "flip_rate"),
          lambda v, t: v <= t["grounded_fr_doco_max"]),
    *(Claim("shovir", "reference-prior", f"|ΔFN| ({key}) <= {T['prior_delta_fn_max']}",
            lambda r, c, key=key: r.value("reference-prior", "shovir", "delta_fn", "full_noise", None, key),
            lambda v, t: abs(v) <= t["prior_delta_fn_max"]) for key in ("f1_14_micro", "f1_5_micro")),
    Claim("shovir", "reference-prior", f"flip rates <= {T['prior_flip_rate_max']} at p = 1", _worst_prior_flip,
          lambda v, t: v <= t["prior_flip_rate_max"]),
    Claim("shovir", "reference-context",
          f"FR_DOCO >= {T['context_fr_doco_min']} on {' + '.join(CONTEXT_DERIVED_WITH_BOXES)} at p = 1",
          lambda r, c: _pooled(r.result("reference-context", "shovir", "flip_rate", "doco", 1.0), CONTEXT_DERIVED_WITH_BOXES),
          lambda v, t: v >= t["context_fr_doco_min"]),
    Claim("beyond_accuracy", "reference-vqa-grounded", f"VRS >= {T['vqa_grounded_vrs_min']}",
          _reliance("vrs", "reference-vqa-grounded"), lambda v, t: v >= t["vqa_grounded_vrs_min"]),
    Claim("beyond_accuracy", "reference-vqa-grounded",
          f"|blank accuracy - nothing-seen answer prior| <= {T['vqa_grounded_blank_tolerance']}", _blank_gap,
          lambda v, t: v <= t["vqa_grounded_blank_tolerance"]),
    Claim("beyond_accuracy", "reference-vqa-prior", f"|VRS| <= {T['vqa_prior_vrs_max']}",
          _reliance("vrs", "reference-vqa-prior"), lambda v, t: abs(v) <= t["vqa_prior_vrs_max"]),
    Claim("beyond_accuracy", "reference-vqa-prior", f"image sensitivity <= {T['vqa_prior_image_sensitivity_max']}",
          _reliance("image_sensitivity", "reference-vqa-prior"), lambda v, t: v <= t["vqa_prior_image_sensitivity_max"]),
    Claim("modalens", "reference-vqa-report", f"swap flip rate with the report <= {T['vqa_report_flip_with_report_max']}",
          _swap("flip_rate_with_report"), lambda v, t: v <= t["vqa_report_flip_with_report_max"]),
    Claim("modalens", "reference-vqa-report",
          f"swap flip rate without the report >= {T['vqa_report_flip_without_report_min']}",
          _swap("flip_rate_without_report"), lambda v, t: v >= t["vqa_report_flip_without_report_min"]),
    Claim("modalens", "reference-vqa-report", "paired difference: 95% interval above 0 (low end shown)",
          _difference_low, lambda v, t: v > 0),
)
"""Every known-answer claim of the demo, by protocol."""


def calibration_checks(results: Results | Mapping[str, Any], thresholds: Mapping[str, float] = THRESHOLDS,
                       context: Mapping[str, Any] | None = None) -> list[CalibrationCheck]:
    """The claims whose protocol and model the results hold, each measured and judged.

    ``context`` carries what the claims need besides the results (``nothing_seen_accuracy``: the
    accuracy of answering every VQA question as if nothing were seen).
    """
    results = results if isinstance(results, Results) else Results(results)
    checks = []
    for claim in CLAIMS:
        if claim.model not in results.aliases or claim.protocol not in results.protocols(claim.model):
            continue
        value = claim.measure(results, context or {})
        passed = value is not None and bool(claim.passes(value, thresholds))
        checks.append(CalibrationCheck(claim.model, claim.text, value, passed, claim.protocol))
    return checks
