# Copyright 2026 The shovir authors. Licensed under the Apache License, Version 2.0.
"""Δ_X of ShoViR (§3.4): μ-F1 under the random-occlusion control minus μ-F1 under OCO or DOCO."""

import evaluate

from shovir.metrics import occlusion_delta
from shovir.metrics._checks import Column
from shovir.metrics._checks import StreamingModule

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

Streaming: every per-sample input (the label vectors or report texts, target classes, ids,
clusters) is a column of the module's one declared schema, so `add()`, `add_batch()` and
`evaluate.combine` store exactly what one `compute()` call does; optional columns are nullable (a
null row means "not given"). Inputs are checked before Arrow casts them: a `ValueError` names the
argument, the row and the fix. Settings (`uncertain`, `n_resamples`, `seed`) are `compute()`
arguments; `labeler=` goes where texts are added (`compute()`, `add()`, `add_batch()` or
`evaluate.load(..., labeler=...)`). Through `evaluate.combine`, pass every input of every combined
module (`None` for an optional one).
"""

_KWARGS_DESCRIPTION = """
Args:
    references (`list` of `list` of `int`, or `list` of `str`): 14-code label vectors (or texts) of the
        reference reports.
    control_predictions (`list` of `list` of `int`, or `list` of `str`): codes (or texts) of the reports
        generated under RO.
    predictions (`list` of `list` of `int`, or `list` of `str`): codes (or texts) of the reports generated
        under OCO or DOCO.
    target_classes (`list` of `str`): the target CheXpert class of each sample (one of the 13 localisable
        classes; not "No Finding").
    clusters (`list` of `str` or `int`, optional): cluster id (e.g. patient) per sample, for a clustered bootstrap.
    sample_ids, control_sample_ids (`list` of `str` or `int`, optional): the sample ids of the two conditions;
        when given they must match row by row (conditions joined on sample_id first).
    labeler (`str` or labeler object, optional): labels report texts given instead of label vectors
        (a `shovir.labelers.LABELERS` name such as "rule" or "chexbert", or an object with the labeler
        interface); default the offline rule-based labeler. Texts and vectors may not be mixed within one input.
    uncertain (`str`, default "negative"), n_resamples (`int`, default 0), seed (`int`, default 0):
        binarisation and paired bootstrap.
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

    Streaming the (image, class) pairs, target classes included:

    >>> for prediction in (cardiomegaly, [0] * 14):
    ...     occlusion_delta.add(reference=cardiomegaly, control_predictions=cardiomegaly, prediction=prediction,
    ...                         target_classes="Cardiomegaly")
    >>> round(occlusion_delta.compute()["delta"], 4)
    0.3333
"""

_COLUMNS = (
    Column("references", "codes"),
    Column("control_predictions", "codes"),
    Column("predictions", "codes"),
    Column("target_classes", "class"),
    Column("clusters", "id", required=False),
    Column("sample_ids", "id", required=False),
    Column("control_sample_ids", "id", required=False),
)


@evaluate.utils.file_utils.add_start_docstrings(_DESCRIPTION, _KWARGS_DESCRIPTION)
class OcclusionDelta(StreamingModule, evaluate.Metric):
    _COLUMNS = _COLUMNS

    def _info(self):
        # columns reach _compute as Arrow arrays (format "arrow"): codes become numpy from the buffers
        return self._arrow_info(evaluate.MetricInfo(
            description=_DESCRIPTION,
            citation=_CITATION,
            inputs_description=_KWARGS_DESCRIPTION,
            features=self._features(),
            reference_urls=["https://github.com/arco-group/ShoViR-Bench"],
        ))

    def _compute(self, references, control_predictions, predictions, target_classes, clusters=None, sample_ids=None,
                 control_sample_ids=None, uncertain="negative", n_resamples=0, seed=0):
        optional = self._optional
        return occlusion_delta(self._codes(references), self._codes(control_predictions), self._codes(predictions),
                               self._pylist(target_classes), uncertain=uncertain,
                               n_resamples=n_resamples, clusters=optional("clusters", clusters), seed=seed,
                               sample_ids=optional("sample_ids", sample_ids),
                               control_sample_ids=optional("control_sample_ids", control_sample_ids))
