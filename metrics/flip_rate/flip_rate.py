# Copyright 2026 The shovir authors. Licensed under the Apache License, Version 2.0.
"""Flip rate FR^c_X of ShoViR (§3.4): the share of findings detected under the random-occlusion control that an intervention makes the model lose."""

import evaluate

from shovir.metrics import flip_rate
from shovir.metrics._checks import Column
from shovir.metrics._checks import StreamingModule

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
    references (`list` of `list` of `int`, or `list` of `str`): ground-truth 14-code label vectors,
        CheXbert head order (`shovir.labels.CLASSES`), or texts to label.
    control_predictions (`list` of `list` of `int`, or `list` of `str`): label vectors (or report texts)
        of the reports generated under the control condition (RO at the same p).
    predictions (`list` of `list` of `int`, or `list` of `str`): label vectors (or report texts) of the
        reports generated under the intervention.
    target_classes (`list` of `str`, optional): the occluded class of each sample (disease-level design;
        one of the 13 localisable classes); without it every localisable class of every sample counts.
    sample_ids, control_sample_ids (`list` of `str` or `int`, optional): the sample ids of the two
        conditions; when given they must match row by row.
    labeler (`str` or labeler object, optional): labels report texts given instead of label vectors
        (a `shovir.labelers.LABELERS` name such as "rule" or "chexbert", or an object with the labeler
        interface); default the offline rule-based labeler. Texts and vectors may not be mixed within one input.
    uncertain (`str`, default "negative"): count uncertain (3) as "negative" or "positive".
    n_resamples (`int`, default 0): bootstrap resamples for a percentile interval of the pooled rate.
    clusters (`list` of `str` or `int`, optional): cluster id (e.g. patient) per sample, for a clustered
        bootstrap.
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

    Streamed in batches, the target classes travel with their rows:

    >>> flip_rate.add_batch(references=[cardiomegaly], control_predictions=[cardiomegaly], predictions=[negated],
    ...                     target_classes=["Cardiomegaly"])
    >>> flip_rate.add_batch(references=[cardiomegaly], control_predictions=[cardiomegaly], predictions=[cardiomegaly],
    ...                     target_classes=["Cardiomegaly"])
    >>> flip_rate.compute()["flip_rate"]
    0.5
"""

_COLUMNS = (
    Column("references", "codes"),
    Column("control_predictions", "codes"),
    Column("predictions", "codes"),
    Column("target_classes", "class", required=False),
    Column("clusters", "id", required=False),
    Column("sample_ids", "id", required=False),
    Column("control_sample_ids", "id", required=False),
)


@evaluate.utils.file_utils.add_start_docstrings(_DESCRIPTION, _KWARGS_DESCRIPTION)
class FlipRate(StreamingModule, evaluate.Metric):
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

    def _compute(self, references, control_predictions, predictions, target_classes=None, clusters=None, sample_ids=None,
                 control_sample_ids=None, uncertain="negative", n_resamples=0, seed=0):
        optional = self._optional
        return flip_rate(self._codes(references), self._codes(control_predictions), self._codes(predictions),
                         target_classes=optional("target_classes", target_classes),
                         uncertain=uncertain, n_resamples=n_resamples, clusters=optional("clusters", clusters), seed=seed,
                         sample_ids=optional("sample_ids", sample_ids),
                         control_sample_ids=optional("control_sample_ids", control_sample_ids))
