# Copyright 2026 The shovir authors. Licensed under the Apache License, Version 2.0.
"""ΔFN of ShoViR (§3.4): the F1-CheXbert drop from the clean image to a full matched-noise image."""

import evaluate

from shovir.metrics import delta_fn
from shovir.metrics._checks import Column
from shovir.metrics._checks import StreamingModule

_CITATION = """\
@article{shovir2026,
  title = {ShoViR: A Benchmark for Evaluating Vision Shortcut Learning in Radiology Report Generation},
  year = {2026}
}
"""

_DESCRIPTION = """\
ΔFN = F1(Baseline) − F1(Full Noise Image) (ShoViR §3.4, Table 1). The Full Noise Image replaces the
whole image with Gaussian noise matched to its intensity statistics, removing every anatomical
structure. A model that reads the image loses most of its F1 (large ΔFN); a model that writes
reports from priors keeps it (ΔFN near 0). Reported for F1-14 and F1-5, micro and macro.

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
    baseline_predictions (`list` of `list` of `int`, or `list` of `str`): codes (or texts) of the reports
        generated from the clean images.
    predictions (`list` of `list` of `int`, or `list` of `str`): codes (or texts) of the reports generated
        from the full-noise images, same samples in the same order.
    clusters (`list` of `str` or `int`, optional): cluster id (e.g. patient) per sample, for a clustered bootstrap.
    sample_ids, noise_sample_ids (`list` of `str` or `int`, optional): the sample ids of the two conditions;
        when given they must match row by row (conditions joined on sample_id first).
    labeler (`str` or labeler object, optional): labels report texts given instead of label vectors
        (a `shovir.labelers.LABELERS` name such as "rule" or "chexbert", or an object with the labeler
        interface); default the offline rule-based labeler. Texts and vectors may not be mixed within one input.
    uncertain (`str`, default "negative"): count uncertain (3) as "negative" or "positive".
    n_resamples (`int`, default 0), seed (`int`, default 0): paired bootstrap.
Returns:
    f1_14_micro, f1_14_macro, f1_5_micro, f1_5_macro (`float`): the drops, in [-1, 1]; larger means more
        reliance on the image.
    baseline, full_noise (`dict`): the F1s themselves under the same keys.
    ci (`dict`): key -> {"low", "high"} (None without resamples).
Examples:
    The model reports the cardiomegaly on the clean image and nothing on noise:

    >>> delta_fn = evaluate.load("shovir/delta_fn")
    >>> cardiomegaly = [0, 1] + [0] * 12
    >>> results = delta_fn.compute(references=[cardiomegaly], baseline_predictions=[cardiomegaly], predictions=[[0] * 13 + [1]])
    >>> results["f1_14_micro"], results["baseline"]["f1_14_micro"], results["full_noise"]["f1_14_micro"]
    (1.0, 1.0, 0.0)

    A model that answers from priors writes the same report on noise:

    >>> delta_fn.compute(references=[cardiomegaly], baseline_predictions=[cardiomegaly], predictions=[cardiomegaly])["f1_5_micro"]
    0.0

    Report texts work too (labelled by the rule-based labeler):

    >>> delta_fn.compute(references=["Cardiomegaly."], baseline_predictions=["The heart is enlarged."],
    ...                  predictions=["No acute cardiopulmonary process."])["f1_14_micro"]
    1.0
"""

_COLUMNS = (
    Column("references", "codes"),
    Column("baseline_predictions", "codes"),
    Column("predictions", "codes"),
    Column("clusters", "id", required=False),
    Column("sample_ids", "id", required=False),
    Column("noise_sample_ids", "id", required=False),
)


@evaluate.utils.file_utils.add_start_docstrings(_DESCRIPTION, _KWARGS_DESCRIPTION)
class DeltaFN(StreamingModule, evaluate.Metric):
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

    def _compute(self, references, baseline_predictions, predictions, clusters=None, sample_ids=None, noise_sample_ids=None,
                 uncertain="negative", n_resamples=0, seed=0):
        optional = self._optional
        return delta_fn(self._codes(references), self._codes(baseline_predictions), self._codes(predictions), uncertain=uncertain, n_resamples=n_resamples,
                        clusters=optional("clusters", clusters), seed=seed, sample_ids=optional("sample_ids", sample_ids),
                        noise_sample_ids=optional("noise_sample_ids", noise_sample_ids))
