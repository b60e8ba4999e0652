"""Metric functions: numpy in, JSON-ready dicts out, one formula in one place.

* :mod:`shovir.metrics.clinical` — ShoViR: F1-CheXbert, per-target F1 and μ-F1, ΔFN, Δ_X,
  flip rate, the authors' cross-disease flip matrix, S_AUC.
* :mod:`shovir.metrics.nlg` — BLEU-1, BLEU-4, ROUGE-L (0–1).
* :mod:`shovir.metrics.visual_reliance` — Beyond Accuracy: accuracy per condition, VRS, Blank
  Drop, Image Sensitivity, VBR/VHR, the visual-claim detector, NVCR, HVRR.
* :mod:`shovir.metrics.swap` — ModaLens: image-swap flip rates per arm, paired difference,
  margin changes, patient-clustered intervals.
* :mod:`shovir.metrics.answers` — answer extraction and normalisation for VQA.
* :mod:`shovir.metrics.bootstrap` — iid and patient-clustered bootstrap, permutation tests.
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
from shovir.metrics.swap import swap_sensitivity
from shovir.metrics.visual_reliance import detect_visual_claims, hallucination_metrics, visual_reliance

__all__ = [
    "Interval",
    "answers_match",
    "bootstrap_interval",
    "bootstrap_intervals",
    "detect_visual_claims",
    "extract_answer",
    "extract_rationale",
    "hallucination_metrics",
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
