# Copyright 2026 The shovir authors. Licensed under the Apache License, Version 2.0.
"""F1-CheXbert (ShoViR §3.4): micro, macro and weighted F1 over the 14 CheXpert classes and the 5 most prevalent ones."""

import datasets
import evaluate

from shovir.metrics import chexbert_f1

_CITATION = """\
@inproceedings{smit2020chexbert,
  title = {Combining Automatic Labelers and Expert Annotations for Accurate Radiology Report Labeling Using BERT},
  author = {Smit, Akshay and Jain, Saahil and Rajpurkar, Pranav and Pareek, Anuj and Ng, Andrew Y. and Lungren, Matthew P.},
  booktitle = {EMNLP},
  year = {2020}
}
"""

_DESCRIPTION = """\
F1-CheXbert compares the CheXpert labels of generated reports with those of the reference reports:
F1-14 over the 14 classes (No Finding included) and F1-5 over Cardiomegaly, Edema, Consolidation,
Atelectasis and Pleural Effusion, each micro-, macro- and support-weighted averaged, plus per-class
precision, recall, F1 and support. Inputs are 14-code label vectors (0 blank, 1 positive, 2 negative,
3 uncertain) from any labeler (shovir's rule-based labeler or CheXbert); the numbers equal
scikit-learn's on the binarised arrays.
"""

_KWARGS_DESCRIPTION = """
Args:
    predictions (`list` of `list` of `int`): 14-code label vectors of the generated reports, CheXbert head order.
    references (`list` of `list` of `int`): 14-code label vectors of the reference reports.
    uncertain (`str`, default "negative"): count uncertain (3) as "negative" (the common `rrg-` convention)
        or "positive".
    n_resamples (`int`, default 0): bootstrap resamples for percentile intervals of the six aggregates.
    clusters (`list`, optional): cluster id (e.g. patient) per sample for a clustered bootstrap.
    seed (`int`, default 0): bootstrap seed.
Returns:
    f1_14, f1_5 (`dict`): {"micro", "macro", "weighted"} F1 in [0, 1]; higher is better.
    per_class (`dict`): class -> {"precision", "recall", "f1", "support"}.
    ci (`dict`): "f1_14_micro", ... -> {"low", "high"} (None without resamples).
Examples:
    One report finds the cardiomegaly, the other calls it uncertain:

    >>> chexbert_f1 = evaluate.load("shovir/chexbert_f1")
    >>> cardiomegaly = [0, 1] + [0] * 12
    >>> results = chexbert_f1.compute(predictions=[cardiomegaly, [0, 3] + [0] * 12], references=[cardiomegaly, cardiomegaly])
    >>> round(results["f1_14"]["micro"], 4), results["per_class"]["Cardiomegaly"]["recall"]
    (0.6667, 0.5)

    Counting uncertain mentions as positive:

    >>> results = chexbert_f1.compute(predictions=[cardiomegaly, [0, 3] + [0] * 12], references=[cardiomegaly, cardiomegaly],
    ...                               uncertain="positive")
    >>> results["f1_14"]["micro"], results["f1_5"]["macro"]
    (1.0, 0.2)
"""

_CODES = datasets.Sequence(datasets.Value("float64"))


@evaluate.utils.file_utils.add_start_docstrings(_DESCRIPTION, _KWARGS_DESCRIPTION)
class ChexbertF1(evaluate.Metric):
    def _info(self):
        return evaluate.MetricInfo(
            description=_DESCRIPTION,
            citation=_CITATION,
            inputs_description=_KWARGS_DESCRIPTION,
            features=datasets.Features({"predictions": _CODES, "references": _CODES}),
            reference_urls=["https://github.com/stanfordmlgroup/CheXbert"],
        )

    def _compute(self, predictions, references, uncertain="negative", n_resamples=0, clusters=None, seed=0):
        return chexbert_f1(references, predictions, uncertain=uncertain, n_resamples=n_resamples, clusters=clusters, seed=seed)
