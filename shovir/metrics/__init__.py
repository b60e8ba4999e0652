"""Metric functions: numpy in, JSON-ready dicts out, one formula in one place.

* :mod:`shovir.metrics.clinical` — ShoViR: F1-CheXbert, per-target F1 and μ-F1, ΔFN, Δ_X,
  flip rate, the authors' cross-disease flip matrix, S_AUC.
* :mod:`shovir.metrics.nlg` — BLEU-1, BLEU-4, ROUGE-L (0–1).
* :mod:`shovir.metrics.bootstrap` — iid and patient-clustered bootstrap, permutation tests.
"""

from shovir.metrics.bootstrap import Interval, bootstrap_interval, paired_permutation_pvalue, resampled_sums
from shovir.metrics.clinical import (
    chexbert_f1,
    cross_disease_flip_matrix,
    delta_fn,
    flip_rate,
    occlusion_delta,
    per_target_f1,
    sensitivity_auc,
)

__all__ = [
    "Interval",
    "bootstrap_interval",
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
