# Copyright 2026 The shovir authors. Licensed under the Apache License, Version 2.0.
"""Δ_X of ShoViR (§3.4): μ-F1 under the random-occlusion control minus μ-F1 under OCO or DOCO."""

import datasets
import evaluate

from shovir.metrics import occlusion_delta

_CITATION = """\
@article{shovir2026,
  title = {ShoViR: A Benchmark for Evaluating Vision Shortcut Learning in Radiology Report Generation},
  year = {2026}
}
"""

_DESCRIPTION = """\
Δ_X = μ-F1(RO) − μ-F1(X) (ShoViR §3.4), with X = OCO (the target disease's boxes occluded) or DOCO
(the co-disease boxes occluded) at the same strength p. μ-F1 averages the per-target-class F1 (head c
scored on the samples whose target is c), weighted by the number of samples evaluated per class.
A positive Δ means the structured occlusion hurts more than occluding random regions.
"""

_KWARGS_DESCRIPTION = """
Args:
    references (`list` of `list` of `int`): 14-code label vectors of the reference reports.
    control_predictions (`list` of `list` of `int`): codes of the reports generated under RO.
    predictions (`list` of `list` of `int`): codes of the reports generated under OCO or DOCO.
    target_classes (`list` of `str`): the target CheXpert class of each sample.
    uncertain (`str`, default "negative"), n_resamples (`int`, default 0), clusters (`list`, optional),
        seed (`int`, default 0): binarisation and paired bootstrap.
Returns:
    delta (`float`): μ-F1(RO) − μ-F1(X); higher means the occluded region mattered more.
    mu_f1_control, mu_f1 (`float`): the two μ-F1s.
    per_class_delta (`dict`): per-class F1 differences.
    ci (`dict`): {"delta": {"low", "high"}}.
Examples:
    Occluding the heart makes the model miss one of two cardiomegalies:

    >>> occlusion_delta = evaluate.load("shovir/occlusion_delta")
    >>> cardiomegaly = [0, 1] + [0] * 12
    >>> results = occlusion_delta.compute(references=[cardiomegaly] * 2, control_predictions=[cardiomegaly] * 2,
    ...                                   predictions=[cardiomegaly, [0] * 14], target_classes=["Cardiomegaly"] * 2)
    >>> round(results["delta"], 4), results["mu_f1_control"]
    (0.3333, 1.0)

    No change under the intervention gives Δ = 0:

    >>> occlusion_delta.compute(references=[cardiomegaly], control_predictions=[cardiomegaly], predictions=[cardiomegaly],
    ...                         target_classes=["Cardiomegaly"])["delta"]
    0.0
"""

_CODES = datasets.Sequence(datasets.Value("float64"))


@evaluate.utils.file_utils.add_start_docstrings(_DESCRIPTION, _KWARGS_DESCRIPTION)
class OcclusionDelta(evaluate.Metric):
    def _info(self):
        return evaluate.MetricInfo(
            description=_DESCRIPTION,
            citation=_CITATION,
            inputs_description=_KWARGS_DESCRIPTION,
            features=datasets.Features({"references": _CODES, "control_predictions": _CODES, "predictions": _CODES,
                                        "target_classes": datasets.Value("string")}),
            reference_urls=["https://github.com/arco-group/ShoViR-Bench"],
        )

    def _compute(self, references, control_predictions, predictions, target_classes, uncertain="negative", n_resamples=0,
                 clusters=None, seed=0):
        return occlusion_delta(references, control_predictions, predictions, target_classes, uncertain=uncertain,
                               n_resamples=n_resamples, clusters=clusters, seed=seed)
