# Copyright 2026 The shovir authors. Licensed under the Apache License, Version 2.0.
"""ΔFN of ShoViR (§3.4): the F1-CheXbert drop from the clean image to a full matched-noise image."""

import datasets
import evaluate

from shovir.metrics import delta_fn

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
"""

_KWARGS_DESCRIPTION = """
Args:
    references (`list` of `list` of `int`): 14-code label vectors of the reference reports.
    baseline_predictions (`list` of `list` of `int`): codes of the reports generated from the clean images.
    predictions (`list` of `list` of `int`): codes of the reports generated from the full-noise images,
        same samples in the same order.
    uncertain (`str`, default "negative"): count uncertain (3) as "negative" or "positive".
    n_resamples (`int`, default 0), clusters (`list`, optional), seed (`int`, default 0): paired bootstrap.
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
"""

_CODES = datasets.Sequence(datasets.Value("float64"))


@evaluate.utils.file_utils.add_start_docstrings(_DESCRIPTION, _KWARGS_DESCRIPTION)
class DeltaFN(evaluate.Metric):
    def _info(self):
        return evaluate.MetricInfo(
            description=_DESCRIPTION,
            citation=_CITATION,
            inputs_description=_KWARGS_DESCRIPTION,
            features=datasets.Features({"references": _CODES, "baseline_predictions": _CODES, "predictions": _CODES}),
            reference_urls=["https://github.com/arco-group/ShoViR-Bench"],
        )

    def _compute(self, references, baseline_predictions, predictions, uncertain="negative", n_resamples=0, clusters=None, seed=0):
        return delta_fn(references, baseline_predictions, predictions, uncertain=uncertain, n_resamples=n_resamples,
                        clusters=clusters, seed=seed)
