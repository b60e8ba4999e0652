"""Metric functions: numpy in, JSON-ready dicts out, one formula in one place.

* :mod:`shovir.metrics.clinical` — ShoViR: F1-CheXbert, per-target F1 and μ-F1, ΔFN, Δ_X,
  flip rate, the authors' cross-disease flip matrix, S_AUC.
* :mod:`shovir.metrics.nlg` — BLEU-1, BLEU-4, ROUGE-L (0–1).
* :mod:`shovir.metrics.visual_reliance` — Beyond Accuracy: accuracy per condition, VRS, Blank
  Drop, Image Sensitivity, VBR/VHR, the visual-claim detector, NVCR, HVRR.
* :mod:`shovir.metrics.swap` — ModaLens: image-swap flip rates per arm, paired difference,
  margin changes, patient-clustered intervals.
* :mod:`shovir.metrics.answers` — answer extraction and normalisation for VQA.
* :mod:`shovir.metrics.icare` — ICARE: answer agreement of the two agents (ICARE-GT/GEN/AVG).
* :mod:`shovir.metrics.green` — GREEN: matched findings over matched + clinically significant errors.
* :mod:`shovir.metrics.bootstrap` — iid and patient-clustered bootstrap, permutation tests.

:data:`METRICS` registers every metric a protocol can bind (:mod:`shovir.protocols`) with what a
leaderboard needs to know without running it: direction, protocol, evaluate module.

>>> METRICS.metadata("chexbert_f1")["higher_is_better"], METRICS.metadata("flip_rate")["evaluate_module"]
(True, 'shovir/flip_rate')
"""

from shovir.metrics.answers import answers_match, extract_answer, extract_rationale, normalize_answer
from shovir.metrics.bootstrap import (
    Interval,
    bootstrap_interval,
    bootstrap_intervals,
    paired_permutation_pvalue,
    resampled_sums,
)
from shovir.metrics.clinical import (
    chexbert_f1,
    cross_disease_flip_matrix,
    delta_fn,
    flip_rate,
    occlusion_delta,
    per_target_f1,
    sensitivity_auc,
)
from shovir.metrics.green import green_score, green_summary
from shovir.metrics.icare import icare_agreement
from shovir.metrics.swap import swap_sensitivity
from shovir.metrics.visual_reliance import detect_visual_claims, hallucination_metrics, visual_reliance
from shovir.registry import Registry


class MetricUnavailable(RuntimeError):
    """A metric cannot run here (missing weights or package); the message says why and how to fix
    it, and the scorer records it next to the metric instead of a number."""


def _metric(target: str, protocol: str, higher_is_better: bool | None, module: str | None, summary: str) -> tuple[str, dict]:
    return target, {"protocol": protocol, "higher_is_better": higher_is_better,
                    "evaluate_module": f"shovir/{module}" if module else None, "summary": summary}


_BUILT_IN = {
    "chexbert_f1": _metric("shovir.metrics.clinical:chexbert_f1", "shovir", True, "chexbert_f1",
                           "F1-CheXbert 14/5 (micro, macro, per class)"),
    "nlg": _metric("shovir.metrics.nlg:nlg_scores", "shovir", True, "nlg", "BLEU-1, BLEU-4, ROUGE-L"),
    "delta_fn": _metric("shovir.metrics.clinical:delta_fn", "shovir", True, "delta_fn",
                        "ΔFN = F1(baseline) − F1(full noise); larger means more image use"),
    "per_target_f1": _metric("shovir.metrics.clinical:per_target_f1", "shovir", True, None,
                             "μ-F1 over the target classes of (image, class) pairs"),
    "occlusion_delta": _metric("shovir.metrics.clinical:occlusion_delta", "shovir", None, "occlusion_delta",
                               "Δ_X = μ-F1(RO) − μ-F1(X): large for OCO and small for DOCO is grounded"),
    "flip_rate": _metric("shovir.metrics.clinical:flip_rate", "shovir", None, "flip_rate",
                         "FR_X: share of targets detected under RO and lost under X (high for OCO, low for DOCO is grounded)"),
    "sensitivity_auc": _metric("shovir.metrics.clinical:sensitivity_auc", "shovir", None, None,
                               "S_AUC: normalised area under μ-F1 versus p"),
    "visual_reliance": _metric("shovir.metrics.visual_reliance:visual_reliance", "beyond_accuracy", True,
                               "visual_reliance", "accuracy per condition, VRS, blank drop, image sensitivity"),
    "f1_radgraph": _metric("shovir.labelers.radgraph:radgraph_scores", "shovir", True, None,
                           "F1-RadGraph (partial reward) with local weights"),
    "hallucination_metrics": _metric("shovir.metrics.visual_reliance:hallucination_metrics", "beyond_accuracy", False,
                                     "hvrr", "NVCR and HVRR: visual claims that do not depend on the image"),
    "swap_sensitivity": _metric("shovir.metrics.swap:swap_sensitivity", "modalens", True, "swap_sensitivity",
                                "paired image-swap flip rates with and without the report"),
    "icare": _metric("shovir.icare.pipeline:icare", "shovir", True, "icare",
                     "ICARE-GT, ICARE-GEN, ICARE-AVG: agreement of LLM agents on questions written from either report"),
    "green": _metric("shovir.icare.green:green", "shovir", True, "green",
                     "GREEN: matched findings / (matched + clinically significant errors), by an LLM judge"),
}
METRICS = Registry("metric", "shovir.metrics", {name: target for name, (target, _) in _BUILT_IN.items()},
                   {name: meta for name, (_, meta) in _BUILT_IN.items()})
"""Metric name → function, with ``protocol``, ``higher_is_better`` (``None``: read with its
definition, no single direction), ``evaluate_module`` and a one-line ``summary``."""

__all__ = [
    "METRICS",
    "MetricUnavailable",
    "Interval",
    "answers_match",
    "bootstrap_interval",
    "bootstrap_intervals",
    "detect_visual_claims",
    "extract_answer",
    "extract_rationale",
    "green_score",
    "green_summary",
    "hallucination_metrics",
    "icare_agreement",
    "normalize_answer",
    "swap_sensitivity",
    "visual_reliance",
    "chexbert_f1",
    "cross_disease_flip_matrix",
    "delta_fn",
    "flip_rate",
    "occlusion_delta",
    "paired_permutation_pvalue",
    "per_target_f1",
    "resampled_sums",
    "sensitivity_auc",
]
