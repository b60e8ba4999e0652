# Copyright 2026 The shovir authors. Licensed under the Apache License, Version 2.0.
"""F1-CheXbert (ShoViR §3.4): micro, macro and weighted F1 over the 14 CheXpert classes and the 5 most prevalent ones."""

import evaluate

from shovir.metrics import chexbert_f1
from shovir.metrics._checks import Column
from shovir.metrics._checks import StreamingModule

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
3 uncertain) from any labeler (shovir's rule-based labeler or CheXbert), or the report texts
themselves, labelled by `labeler=` (the RadEval-style call); the numbers equal scikit-learn's on the
binarised arrays.

Streaming: every per-sample input (the label vectors or report texts, ids, clusters) is a
column of the module's one declared schema, so `add()`, `add_batch()` and `evaluate.combine` store
exactly what one `compute()` call does; optional columns are nullable (a null row means "not given").
Inputs are checked before Arrow casts them: a `ValueError` names the argument, the row and the fix.
Settings (`uncertain`, `n_resamples`, `seed`) are `compute()` arguments; `labeler=` goes where texts
are added (`compute()`, `add()`, `add_batch()` or `evaluate.load(..., labeler=...)`). Through
`evaluate.combine`, pass every input of every combined module (`None` for an optional one).
"""

_KWARGS_DESCRIPTION = """
Args:
    predictions (`list` of `list` of `int`, or `list` of `str`): 14-code label vectors of the generated
        reports, CheXbert head order, or the report texts.
    references (`list` of `list` of `int`, or `list` of `str`): label vectors (or texts) of the reference reports.
    clusters (`list` of `str` or `int`, optional): cluster id (e.g. patient) per sample for a clustered bootstrap.
    labeler (`str` or labeler object, optional): labels report texts given instead of label vectors
        (a `shovir.labelers.LABELERS` name such as "rule" or "chexbert", or an object with the labeler
        interface); default the offline rule-based labeler. Texts and vectors may not be mixed within one
        input.
    uncertain (`str`, default "negative"): count uncertain (3) as "negative" (the common `rrg-` convention)
        or "positive".
    n_resamples (`int`, default 0): bootstrap resamples for percentile intervals of the six aggregates.
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

    Report texts, as RadEval takes them (labelled by the rule-based labeler):

    >>> results = chexbert_f1.compute(predictions=["Small left effusion."], references=["No effusion."])
    >>> results["per_class"]["Pleural Effusion"]["precision"], results["n"]
    (0.0, 1)

    Streaming, one sample at a time or in batches, gives the same numbers:

    >>> chexbert_f1.add(prediction=cardiomegaly, reference=cardiomegaly)
    >>> chexbert_f1.add_batch(predictions=[[0, 3] + [0] * 12], references=[cardiomegaly])
    >>> round(chexbert_f1.compute()["f1_14"]["micro"], 4)
    0.6667
"""

_COLUMNS = (Column("predictions", "codes"), Column("references", "codes"), Column("clusters", "id", required=False))


@evaluate.utils.file_utils.add_start_docstrings(_DESCRIPTION, _KWARGS_DESCRIPTION)
class ChexbertF1(StreamingModule, evaluate.Metric):
    _COLUMNS = _COLUMNS

    def _info(self):
        # columns reach _compute as Arrow arrays (format "arrow"): codes become numpy from the buffers
        return self._arrow_info(evaluate.MetricInfo(
            description=_DESCRIPTION,
            citation=_CITATION,
            inputs_description=_KWARGS_DESCRIPTION,
            features=self._features(),
            reference_urls=["https://github.com/stanfordmlgroup/CheXbert"],
        ))

    def _compute(self, predictions, references, clusters=None, uncertain="negative", n_resamples=0, seed=0):
        return chexbert_f1(self._codes(references), self._codes(predictions), uncertain=uncertain, n_resamples=n_resamples,
                           clusters=self._optional("clusters", clusters), seed=seed)
