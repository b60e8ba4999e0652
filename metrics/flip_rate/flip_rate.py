# Copyright 2026 The shovir authors. Licensed under the Apache License, Version 2.0.
"""Flip rate FR^c_X of ShoViR (§3.4): the share of findings detected under the random-occlusion control that an intervention makes the model lose."""

import datasets
import evaluate

from shovir.metrics import flip_rate

_CITATION = """\
@article{shovir2026,
  title = {ShoViR: A Benchmark for Evaluating Vision Shortcut Learning in Radiology Report Generation},
  year = {2026}
}
"""

_DESCRIPTION = """\
The flip rate of ShoViR (§3.4) counts, among the findings that are present (ground truth 1) and
detected under the random-occlusion control RO, the share that the model no longer reports under
an intervention X (OCO: the disease boxes occluded; DOCO: the co-disease boxes occluded):
FR^c_X = |{i : y_ic = 1, ŷ^RO_ic = 1, ŷ^X_ic = 0}| / |{i : y_ic = 1, ŷ^RO_ic = 1}|.
A grounded model loses findings under OCO (high FR_OCO) and keeps them under DOCO (low FR_DOCO).
Inputs are 14-code CheXpert label vectors (0 blank, 1 positive, 2 negative, 3 uncertain).
"""

_KWARGS_DESCRIPTION = """
Args:
    references (`list` of `list` of `int`): ground-truth 14-code label vectors, CheXbert head order
        (`shovir.labels.CLASSES`).
    control_predictions (`list` of `list` of `int`): label vectors of the reports generated under the
        control condition (RO at the same p).
    predictions (`list` of `list` of `int`): label vectors of the reports generated under the intervention.
    target_classes (`list` of `str`, optional): the occluded class of each sample (disease-level design);
        without it every localisable class of every sample counts.
    uncertain (`str`, default "negative"): count uncertain (3) as "negative" or "positive".
    n_resamples (`int`, default 0): bootstrap resamples for a percentile interval of the pooled rate.
    clusters (`list`, optional): cluster id (e.g. patient) per sample, for a clustered bootstrap.
    seed (`int`, default 0): bootstrap seed.
Returns:
    flip_rate (`float` or `None`): pooled flip rate, in [0, 1]; higher means the model depends more on the
        occluded region. `None` when no finding is detected under the control.
    per_class (`dict`): flip rate per class (`None` where the class has no eligible finding).
    flips, denominators (`dict`): the counts behind each rate.
    ci (`dict`): {"flip_rate": {"low", "high"}} (None without resamples).
Examples:
    Two Cardiomegaly findings detected under RO, one lost under OCO:

    >>> flip_rate = evaluate.load("shovir/flip_rate")
    >>> cardiomegaly = [0, 1] + [0] * 12
    >>> negated = [0, 2] + [0] * 12
    >>> results = flip_rate.compute(references=[cardiomegaly, cardiomegaly], control_predictions=[cardiomegaly, cardiomegaly],
    ...                             predictions=[negated, cardiomegaly], target_classes=["Cardiomegaly", "Cardiomegaly"])
    >>> results["flip_rate"], results["per_class"]["Cardiomegaly"]
    (0.5, 0.5)

    Without target classes every present finding counts; uncertain predictions count as negative by default:

    >>> both = [0, 1, 0, 0, 1] + [0] * 9
    >>> results = flip_rate.compute(references=[both], control_predictions=[both], predictions=[[0, 3, 0, 0, 1] + [0] * 9])
    >>> results["flip_rate"], results["flips"]["Cardiomegaly"], results["flips"]["Edema"]
    (0.5, 1, 0)
"""

_CODES = datasets.Sequence(datasets.Value("float64"))


@evaluate.utils.file_utils.add_start_docstrings(_DESCRIPTION, _KWARGS_DESCRIPTION)
class FlipRate(evaluate.Metric):
    def _info(self):
        base = {"references": _CODES, "control_predictions": _CODES, "predictions": _CODES}
        return evaluate.MetricInfo(
            description=_DESCRIPTION,
            citation=_CITATION,
            inputs_description=_KWARGS_DESCRIPTION,
            features=[
                datasets.Features(base),
                datasets.Features({**base, "target_classes": datasets.Value("string")}),
            ],
            reference_urls=["https://github.com/arco-group/ShoViR-Bench"],
        )

    def _compute(self, references, control_predictions, predictions, target_classes=None, uncertain="negative",
                 n_resamples=0, clusters=None, seed=0):
        return flip_rate(references, control_predictions, predictions, target_classes=target_classes, uncertain=uncertain,
                         n_resamples=n_resamples, clusters=clusters, seed=seed)
